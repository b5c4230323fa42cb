"""Hugging Face `generate` backend: the CPU default and the reference for log-prob checks."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

from opid_rllib.generation.base import Generation, GenerationBackend


class HFBackend(GenerationBackend):
    """Batched sampling with `model.generate`; returns per-token log-probs of the sampled tokens.

    The log-probs are log_softmax(logits / T) of the *raw* logits, i.e. the same quantity the
    learner recomputes (no top-k: HF's default top_k=50 would silently change the policy).
    When `model` is given it is used in place (the env runner shares its RLModule's model,
    so weight sync needs no copy).
    """

    name = "hf"

    def __init__(self, model_path: str | None = None, *, model=None, tokenizer=None, dtype: str = "float32",
                 max_batch_size: int = 64, **_: Any):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_path)
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        self.model = model
        self.max_batch_size = int(max_batch_size)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self.eos_ids = _eos_ids(self.model, self.tokenizer)

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.model.load_state_dict(dict(state_dict), strict=False)

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], *, temperature: float = 1.0, max_new_tokens: int = 64,
                 top_p: float = 1.0, seed: int | None = None) -> list[Generation]:
        out: list[Generation] = []
        if seed is not None:
            torch.manual_seed(int(seed))
        for start in range(0, len(prompt_ids), self.max_batch_size):
            out.extend(self._generate_chunk(prompt_ids[start:start + self.max_batch_size], temperature,
                                            max_new_tokens, top_p))
        return out

    def _generate_chunk(self, prompt_ids, temperature, max_new_tokens, top_p) -> list[Generation]:
        if not prompt_ids:
            return []
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompt_ids)
        input_ids = torch.full((len(prompt_ids), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(input_ids)
        for i, p in enumerate(prompt_ids):  # left padding: every prompt ends at the same column
            if len(p):
                input_ids[i, width - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
                attn[i, width - len(p):] = 1
        greedy = temperature is None or temperature <= 0
        was_training = self.model.training
        self.model.eval()
        try:
            res = self.model.generate(
                input_ids=input_ids.to(device), attention_mask=attn.to(device),
                max_new_tokens=int(max_new_tokens), do_sample=not greedy,
                temperature=None if greedy else float(temperature), top_k=None if greedy else 0,
                top_p=None if greedy else float(top_p), eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
                output_logits=True, return_dict_in_generate=True,
            )
        finally:
            if was_training:
                self.model.train()
        seqs = res.sequences[:, width:].cpu()
        # logits: tuple over steps of [B, V] raw logits (before temperature / top-p).
        logits = torch.stack(res.logits, dim=1).float().cpu()
        scale = 1.0 if greedy else float(temperature)
        logp_all = torch.log_softmax(logits / scale, dim=-1)
        tok_logp = logp_all.gather(-1, seqs[:, : logits.shape[1]].unsqueeze(-1)).squeeze(-1)
        gens = []
        for i in range(seqs.shape[0]):
            ids = seqs[i].tolist()
            n, finish = len(ids), "length"
            for j, t in enumerate(ids):
                if t in self.eos_ids:
                    n, finish = j + 1, "stop"  # keep EOS: the policy must learn to stop
                    break
            ids = ids[:n]
            gens.append(Generation(token_ids=ids, logprobs=tok_logp[i, :n].tolist(),
                                   text=self.tokenizer.decode(ids, skip_special_tokens=True),
                                   finish_reason=finish))
        return gens


def _eos_ids(model, tokenizer) -> list[int]:
    ids = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for e in (gen_eos, tokenizer.eos_token_id):
        if isinstance(e, int):
            ids.add(e)
        elif isinstance(e, (list, tuple)):
            ids.update(int(x) for x in e)
    return sorted(ids)
