"""Hugging Face `generate` backend: the CPU default and the reference for log-prob checks."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from opid_rllib.generation.base import Generation, GenerationBackend


class HFBackend(GenerationBackend):
    """Batched sampling with `model.generate`; returns per-token log-probs of the sampled tokens.
    Prompts are generated in length-sorted chunks of at most `max_batch_size` (default 8 on CPU, 64 else).

    The log-probs are log_softmax(logits / T) of the *raw* logits, i.e. the same quantity the
    learner recomputes (no top-k: HF's default top_k=50 would silently change the policy).
    When `model` is given it is used in place (the env runner shares its RLModule's model,
    so weight sync needs no copy). `stop`: strings that end a response (the env's closing action
    tags); the response keeps the token that completes one, its text ends with it (as vLLM's
    `include_stop_str_in_output`), and stopping early leaves the sampled tokens' log-probs unchanged.
    """

    name = "hf"

    def __init__(self, model_path: str | None = None, *, model=None, tokenizer=None, dtype: str = "float32",
                 max_batch_size: int | None = None, stop: Sequence[str] | None = None):
        from transformers import AutoTokenizer

        from opid_rllib.models.resolve import load_model

        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_path)
        if model is None:
            model = load_model(model_path, getattr(torch, dtype))
        self.model = model
        if max_batch_size is None:  # CPU: small length-sorted chunks pad less (0.78x rollout time vs 64 rows
            # with action-only answers, bench/eval_speed.py); accelerators want wide batches
            max_batch_size = 8 if next(model.parameters()).device.type == "cpu" else 64
        self.max_batch_size = int(max_batch_size)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self.eos_ids = _eos_ids(self.model, self.tokenizer)
        self.stop = tuple(str(s) for s in (stop or ()) if s)

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.model.load_state_dict(dict(state_dict), strict=False)

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], *, temperature: float = 1.0, max_new_tokens: int = 64,
                 top_p: float = 1.0, seed: int | None = None) -> list[Generation]:
        if seed is not None:
            torch.manual_seed(int(seed))
        # Chunks of similar length: left padding to the longest prompt of a chunk is wasted prefill
        # (bench/eval_speed.py measures the effect of max_batch_size); results come back in input order.
        order = sorted(range(len(prompt_ids)), key=lambda i: len(prompt_ids[i]))
        out: list[Generation | None] = [None] * len(prompt_ids)
        for start in range(0, len(order), self.max_batch_size):
            rows = order[start:start + self.max_batch_size]
            for i, g in zip(rows, self._generate_chunk([prompt_ids[i] for i in rows], temperature,
                                                       max_new_tokens, top_p)):
                out[i] = g
        return out  # type: ignore[return-value]

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
        watcher = _StopStrings(self.tokenizer, self.stop, width, self.eos_ids) if self.stop else None
        was_training = self.model.training
        self.model.eval()
        try:
            res = self.model.generate(
                input_ids=input_ids.to(device), attention_mask=attn.to(device),
                max_new_tokens=int(max_new_tokens), do_sample=not greedy,
                temperature=None if greedy else float(temperature), top_k=None if greedy else 0,
                top_p=None if greedy else float(top_p), eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
                output_logits=True, return_dict_in_generate=True,
                stopping_criteria=StoppingCriteriaList([watcher]) if watcher else None,
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
            if watcher is not None and i in watcher.stopped_at and watcher.stopped_at[i] <= n:
                n, finish = watcher.stopped_at[i], "stop"
            ids = ids[:n]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            gens.append(Generation(token_ids=ids, logprobs=tok_logp[i, :n].tolist(),
                                   text=_cut_after_stop(text, self.stop), finish_reason=finish))
        return gens


class _StopStrings(StoppingCriteria):
    """Ends a row once its response text contains a stop string; records how many response tokens
    it had then (HF pads finished rows afterwards, so the length must be taken at that step).

    Each step decodes only the last few tokens of the unfinished rows: every token is at least one
    character, so a stop string completed by the newest token lies within its last len(stop) tokens.
    """

    def __init__(self, tokenizer, stop: Sequence[str], prompt_width: int, eos_ids: Sequence[int]):
        self.tokenizer, self.stop, self.prompt_width = tokenizer, tuple(stop), int(prompt_width)
        self.window = max(len(s) for s in self.stop) + 1
        self.eos_ids = set(int(e) for e in eos_ids)
        self.stopped_at: dict[int, int] = {}
        self.ended: set[int] = set()

    def __call__(self, input_ids, scores, **kwargs):
        n = input_ids.shape[1] - self.prompt_width
        rows = []
        for i in range(input_ids.shape[0]):
            if i in self.stopped_at or i in self.ended:
                continue
            if int(input_ids[i, -1]) in self.eos_ids:
                self.ended.add(i)  # EOS ended it; later tokens are padding
                continue
            rows.append(i)
        if rows:
            start = input_ids.shape[1] - min(self.window, n)
            tails = self.tokenizer.batch_decode(input_ids[rows, start:].tolist(), skip_special_tokens=False)
            for i, text in zip(rows, tails):
                if any(s in text for s in self.stop):
                    self.stopped_at[i] = n
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if self.stopped_at:
            done[list(self.stopped_at)] = True
        return done


def _cut_after_stop(text: str, stop: Sequence[str]) -> str:
    """Text up to and including the first stop string (the last token may carry a few more chars)."""
    ends = [text.find(s) + len(s) for s in stop if s in text]
    return text[:min(ends)] if ends else text


def _eos_ids(model, tokenizer) -> list[int]:
    ids = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for e in (gen_eos, tokenizer.eos_token_id):
        if isinstance(e, int):
            ids.add(e)
        elif isinstance(e, (list, tuple)):
            ids.update(int(x) for x in e)
    return sorted(ids)
