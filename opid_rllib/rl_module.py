"""The LLM policy as an RLlib `TorchRLModule`.

One module serves three callers:
  * the env runner: `generate(user_texts)` samples responses (through a generation backend);
  * the learner: `_forward_train(batch)` gives per-token log-probs and entropies of given
    response tokens under given prompts, with gradients;
  * the OPID re-scoring connector and the KL reference: `score(...)`, the same computation
    without gradients, so Delta = logp(y | skill prompt) - logp(y | prompt) is exactly zero
    when the two prompts are equal.

State is exchanged as torch tensors (RLlib's default numpy conversion fails on bf16 and
copies tied weights twice).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule

from opid_rllib.generation.base import Generation

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pack(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int):
    """Left-pad prompts and right-pad responses into numpy arrays (the batch layout we ship)."""
    n = len(prompt_ids)
    p_w = max([len(p) for p in prompt_ids] + [1])
    r_w = max([len(r) for r in response_ids] + [1])
    prompts = np.full((n, p_w), pad_id, dtype=np.int64)
    responses = np.full((n, r_w), pad_id, dtype=np.int64)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        if len(p):
            prompts[i, p_w - len(p):] = p
        if len(r):
            responses[i, : len(r)] = r
    return {"prompt_ids": prompts, "prompt_len": np.array([len(p) for p in prompt_ids], np.int64),
            "response_ids": responses, "response_len": np.array([len(r) for r in response_ids], np.int64)}


def response_logprobs(model, prompt_ids: torch.Tensor, prompt_len: torch.Tensor, response_ids: torch.Tensor,
                      response_len: torch.Tensor, temperature: float = 1.0, with_entropy: bool = False):
    """log pi(y_l | x, y_<l) for every response token, as a [B, R] tensor (0 beyond response_len).

    prompt_ids are left-padded, response_ids right-padded. Columns that are padding in every
    row are trimmed before the forward pass, so a micro-batch of short prompts stays cheap.
    """
    b, p_w = prompt_ids.shape
    r_w = response_ids.shape[1]
    p_max = max(int(prompt_len.max()), 1)
    r_max = max(int(response_len.max()), 1)
    prompts = prompt_ids[:, p_w - p_max:]
    resp = response_ids[:, :r_max]
    cols = torch.arange(p_max, device=prompts.device)
    p_mask = cols.unsqueeze(0) >= (p_max - prompt_len).unsqueeze(1)
    r_mask = torch.arange(r_max, device=resp.device).unsqueeze(0) < response_len.unsqueeze(1)
    input_ids = torch.cat([prompts, resp], dim=1)
    attn = torch.cat([p_mask, r_mask], dim=1).long()
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attn, position_ids=pos, use_cache=False)
    # Logits at position t predict token t+1: the response starts at column p_max.
    logits = out.logits[:, p_max - 1: p_max - 1 + r_max, :].float() / float(temperature)
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, resp.unsqueeze(-1)).squeeze(-1) * r_mask
    ent = None
    if with_entropy:
        ent = -(logp_all.exp() * logp_all).sum(-1) * r_mask
    if r_max < r_w:  # pad back to the batch's response width
        pad = torch.zeros(b, r_w - r_max, device=logp.device, dtype=logp.dtype)
        logp = torch.cat([logp, pad], dim=1)
        ent = torch.cat([ent, pad], dim=1) if ent is not None else None
    return logp, ent


class LLMRLModule(TorchRLModule):
    """model_config keys: model_path, dtype, temperature, top_p, max_new_tokens, max_prompt_len,
    enable_thinking, generation_backend ("hf"|"vllm"), backend_kwargs, gradient_checkpointing,
    score_micro_batch_size."""

    def setup(self):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.model_config or {}
        if cfg.get("torch_threads"):
            # Small models on few cores: one thread avoids per-op sync waits (measured in docs/VLLM.md).
            torch.set_num_threads(int(cfg["torch_threads"]))
        path = cfg.get("model_path")
        if not path:
            raise ValueError("model_config['model_path'] is required: run opid_rllib.models.resolve_model first")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[cfg.get("dtype", "float32")])
        if cfg.get("gradient_checkpointing") and not self.inference_only:
            self.model.gradient_checkpointing_enable()
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
            else self.tokenizer.eos_token_id
        self._backend = None

    # ---- prompts ------------------------------------------------------------------------
    def encode_prompts(self, user_texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        """Chat template + tokenize + left-truncate to max_prompt_len (runner and learner share this)."""
        from opid_rllib.prompts import chat_prompt, truncate_left

        cfg = self.model_config
        ids, truncated = [], []
        for text in user_texts:
            chat = chat_prompt(self.tokenizer, text, enable_thinking=bool(cfg.get("enable_thinking", False)))
            toks = self.tokenizer(chat, add_special_tokens=False)["input_ids"]
            toks, cut = truncate_left(toks, int(cfg.get("max_prompt_len", 2048)))
            ids.append(list(toks))
            truncated.append(bool(cut))
        return ids, truncated

    # ---- generation (env runner side) ----------------------------------------------------
    @property
    def backend(self):
        if self._backend is None:
            cfg = self.model_config
            name = cfg.get("generation_backend", "hf")
            if name == "hf":
                from opid_rllib.generation.hf import HFBackend

                self._backend = HFBackend(model=self.model, tokenizer=self.tokenizer,
                                          **cfg.get("backend_kwargs", {}))
            else:
                from opid_rllib.generation.base import make_backend

                kw = dict(cfg.get("backend_kwargs", {}))
                kw.setdefault("dtype", cfg.get("dtype", "float32"))
                self._backend = make_backend(name, model_path=cfg["model_path"], **kw)
        return self._backend

    def generate(self, prompt_ids: Sequence[Sequence[int]], *, temperature: float | None = None,
                 max_new_tokens: int | None = None, top_p: float | None = None,
                 seed: int | None = None) -> list[Generation]:
        cfg = self.model_config
        return self.backend.generate(
            prompt_ids,
            temperature=cfg.get("temperature", 1.0) if temperature is None else temperature,
            max_new_tokens=int(cfg.get("max_new_tokens", 64) if max_new_tokens is None else max_new_tokens),
            top_p=cfg.get("top_p", 1.0) if top_p is None else top_p, seed=seed)

    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """Inference/exploration: batch["prompt_texts"] (user texts) -> sampled responses."""
        ids, _ = self.encode_prompts(list(batch["prompt_texts"]))
        gens = self.generate(ids)
        return {"generations": gens, "actions": [g.text for g in gens]}

    # ---- training side ------------------------------------------------------------------
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logp, ent = response_logprobs(self.model, batch["prompt_ids"], batch["prompt_len"], batch["response_ids"],
                                      batch["response_len"], temperature=self.model_config.get("temperature", 1.0),
                                      with_entropy=True)
        return {"logp": logp, "entropy": ent}

    @torch.no_grad()
    def score(self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
              model=None, micro_batch_size: int | None = None) -> list[np.ndarray]:
        """No-grad log-probs of each response under its prompt, one float32 array per sample."""
        model = model if model is not None else self.model
        mb = int(micro_batch_size or self.model_config.get("score_micro_batch_size", 8))
        was_training = model.training
        model.eval()
        out: list[np.ndarray] = []
        try:
            for s in range(0, len(prompt_ids), mb):
                b = pack(prompt_ids[s:s + mb], response_ids[s:s + mb], self.pad_id)
                t = {k: torch.as_tensor(v) for k, v in b.items()}
                logp, _ = response_logprobs(model, t["prompt_ids"], t["prompt_len"], t["response_ids"],
                                            t["response_len"], temperature=self.model_config.get("temperature", 1.0))
                for i, n in enumerate(b["response_len"]):
                    out.append(logp[i, :n].float().cpu().numpy())
        finally:
            if was_training:
                model.train()
        return out

    # ---- state: torch tensors, bf16-safe, tied weights once -------------------------------
    def get_state(self, components=None, *, not_components=None, inference_only: bool = False, **kwargs):
        seen: set[int] = set()
        state = {}
        for k, v in self.state_dict().items():
            ptr = v.data_ptr()
            if ptr in seen:  # tied embedding / lm_head: ship once
                continue
            seen.add(ptr)
            state[k] = v.detach().cpu().clone()
        return state

    def set_state(self, state) -> None:
        state = {k: (v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v))) for k, v in state.items()}
        missing, unexpected = self.load_state_dict(state, strict=False)
        tied = {k for k in missing if k.endswith("lm_head.weight")}
        if set(missing) - tied:
            raise ValueError(f"LLMRLModule.set_state: missing keys {sorted(set(missing) - tied)[:5]}")
        if self._backend is not None and getattr(self._backend, "name", "hf") != "hf":
            self._backend.load_state_dict({k[len("model."):]: v for k, v in state.items() if k.startswith("model.")})
