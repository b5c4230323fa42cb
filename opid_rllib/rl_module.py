"""The LLM policy as an RLlib `TorchRLModule`.

One module serves three callers:
  * the env runner: `generate(user_texts)` samples responses (through a generation backend);
  * the learner: `_forward_train(batch)` gives per-token log-probs and entropies of given
    response tokens under given prompts, with gradients;
  * the OPID re-scoring connector and the KL reference: `score(...)`, the same computation
    without gradients, so Delta = logp(y | skill prompt) - logp(y | prompt) is exactly zero
    when the two prompts are equal.

Mixed precision (dtype "bfloat16"/"float16"): the learner's module keeps fp32 master weights
(AdamW's lr-1e-6 steps are far below bf16's resolution and would round to nothing) and computes
under `torch.autocast`; the env runner's module (inference_only) holds the configured dtype and
gets cast copies at weight sync.

State is exchanged as torch tensors (RLlib's default numpy conversion fails on bf16 and
copies tied weights twice).
"""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import numpy as np
import torch
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule

from opid_rllib import progress
from opid_rllib.generation.base import Generation
from opid_rllib.quiet import apply_torch_threads, silence_ray_notices
from opid_rllib.settings import DTYPE_NAMES, default
from opid_rllib.token_logprobs import length_order, pack, response_logprobs

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}
silence_ray_notices()  # RLlib's RLModule.__init__ warns about its own deprecated RLModuleConfig (quiet.py)


class LLMRLModule(TorchRLModule):
    """model_config keys: model_path, dtype, temperature, top_p, max_new_tokens, max_prompt_len,
    enable_thinking, generation_backend ("hf"|"vllm"), backend_kwargs, gradient_checkpointing,
    score_micro_batch_size."""

    def setup(self):
        from transformers import AutoTokenizer

        from opid_rllib.models.resolve import load_model, node_model_path

        cfg = self.model_config or {}
        # Every process that builds the policy (Ray's runners and learners too): torch_threads, else 1 without CUDA.
        apply_torch_threads(cfg.get("torch_threads"))
        if not cfg.get("model_path"):
            raise ValueError("model_config['model_path'] is required: run opid_rllib.models.resolve_model first")
        path = node_model_path(cfg)  # this node's copy: cluster nodes share no disk
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        name = cfg.get("dtype", "float32")
        if name not in DTYPES:
            raise ValueError(f"model_config['dtype']={name!r}: use one of {sorted(DTYPES)}")
        self.compute_dtype = DTYPES[name]
        lora = cfg.get("lora") if not self.inference_only else None
        # Learner: fp32 master weights + autocast; sampler: the compute dtype itself. With LoRA the
        # frozen base stays in the compute dtype and only the (fp32) adapters are masters.
        weights = self.compute_dtype if (self.inference_only or lora) else torch.float32
        self.model = load_model(path, weights)
        if cfg.get("gradient_checkpointing") and not self.inference_only:
            self.model.gradient_checkpointing_enable()
            self.model.train()  # transformers checkpoints only in training mode; from_pretrained returns eval()
            _dropout_off(self.model)  # ...but the policy's math stays eval()'s: PPO's ratio must not see dropout
            if lora:
                self.model.enable_input_require_grads()  # checkpointed blocks need a grad-carrying input
        if lora:
            from opid_rllib.models.lora import wrap_lora

            self.model = wrap_lora(self.model, lora)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None \
            else self.tokenizer.eos_token_id
        self._backend = None

    # ---- prompts ------------------------------------------------------------------------
    def encode_prompts(self, user_texts: Sequence[str]) -> tuple[list[list[int]], list[bool]]:
        """Chat template + tokenize + left-truncate to max_prompt_len (runner, learner and opid-sft share this)."""
        from opid_rllib.prompts.chat import encode_prompts

        cfg = self.model_config
        return encode_prompts(self.tokenizer, user_texts, int(cfg.get("max_prompt_len", default("max_prompt_len"))),
                              enable_thinking=bool(cfg.get("enable_thinking", False)))

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
                from opid_rllib.generation.registry import make_backend

                kw = dict(cfg.get("backend_kwargs", {}))
                kw.setdefault("dtype", cfg.get("dtype", "float32"))
                from opid_rllib.models.resolve import node_model_path

                self._backend = make_backend(name, model_path=node_model_path(cfg), **kw)
        return self._backend

    def generate(self, prompt_ids: Sequence[Sequence[int]], *, temperature: float | None = None,
                 max_new_tokens: int | None = None, top_p: float | None = None,
                 seed: int | None = None) -> list[Generation]:
        cfg = self.model_config
        return self.backend.generate(
            prompt_ids,
            temperature=cfg.get("temperature", 1.0) if temperature is None else temperature,
            max_new_tokens=int(cfg.get("max_new_tokens", default("max_new_tokens")) if max_new_tokens is None
                               else max_new_tokens),
            top_p=cfg.get("top_p", 1.0) if top_p is None else top_p, seed=seed)

    # ---- training side ------------------------------------------------------------------
    def batch_arrays(self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]]) -> dict:
        """The layout `_forward_train` and `score` read: prompts left-padded, responses right-padded, lengths."""
        return pack(prompt_ids, response_ids, self.pad_id)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def autocast(self, model=None):
        """bf16/fp16 compute over fp32 weights; a no-op when the weights already are the compute dtype."""
        model = model if model is not None else self.model
        p = next(model.parameters())
        trainable = [q.dtype for q in model.parameters() if q.requires_grad]
        if self.compute_dtype == torch.float32 or all(d == self.compute_dtype for d in trainable):
            return contextlib.nullcontext()  # e.g. the frozen bf16 KL reference
        return torch.autocast(device_type="cuda" if p.device.type == "cuda" else "cpu", dtype=self.compute_dtype)

    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        dev = self.device
        t = {k: torch.as_tensor(batch[k]).to(dev) for k in ("prompt_ids", "prompt_len", "response_ids", "response_len")}
        with self.autocast():
            logp, ent = response_logprobs(self.model, t["prompt_ids"], t["prompt_len"], t["response_ids"],
                                          t["response_len"], temperature=self.model_config.get("temperature", 1.0),
                                          with_entropy=True)
        return {"logp": logp, "entropy": ent}

    @torch.no_grad()
    def score(self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
              model=None, micro_batch_size: int | None = None) -> list[np.ndarray]:
        """No-grad log-probs of each response under its prompt, one float32 array per sample.

        Micro-batches are cut from the samples sorted by length (results come back in input
        order), so a batch pads to its neighbours' length, not to the longest prompt of the step.
        """
        model = model if model is not None else self.model
        mb = int(micro_batch_size or self.model_config.get("score_micro_batch_size", default("score_micro_batch_size")))
        order = length_order([len(p) for p in prompt_ids], [len(r) for r in response_ids]).tolist()
        was_training = model.training
        model.eval()
        dev = next(model.parameters()).device
        temperature = self.model_config.get("temperature", 1.0)
        out: list[np.ndarray | None] = [None] * len(prompt_ids)
        progress.post("scoring rows", 0, len(order))
        try:
            for s in range(0, len(order), mb):
                rows = order[s:s + mb]
                b = pack([prompt_ids[i] for i in rows], [response_ids[i] for i in rows], self.pad_id)
                t = {k: torch.as_tensor(v).to(dev) for k, v in b.items()}
                with self.autocast(model):
                    logp, _ = response_logprobs(model, t["prompt_ids"], t["prompt_len"], t["response_ids"],
                                                t["response_len"], temperature=temperature)
                for j, (i, n) in enumerate(zip(rows, b["response_len"])):
                    out[i] = logp[j, :n].float().cpu().numpy()
                progress.post("scoring rows", s + len(rows), len(order))  # the re-scoring's pace, for the heartbeat
        finally:
            if was_training:
                model.train()
        return out

    # ---- state: torch tensors, bf16-safe, tied weights once -------------------------------
    def get_state(self, components=None, *, not_components=None, inference_only: bool = False, **kwargs):
        """Full precision for checkpoints; with inference_only (weight sync to the samplers)
        floating tensors are cast to the compute dtype, halving what a bf16 run ships."""
        from opid_rllib.models.lora import adapter_state, is_lora, merged_state
        from opid_rllib.sharding import is_sharded

        cast = self.compute_dtype if inference_only else None
        items = self.state_dict().items()
        if is_sharded(self.model):  # the whole weights the learner gathered after its last update (sharding.py)
            if getattr(self, "full_state", None) is None:
                raise RuntimeError("a sharded policy's whole weights are kept on learner rank 0 only")
            items = (("model." + k, v) for k, v in self.full_state.items())
        elif is_lora(self.model):  # checkpoints: adapters only; samplers: merged plain weights
            if not inference_only:
                return {"model." + k: v.cpu().clone() for k, v in adapter_state(self.model).items()}
            items = (("model." + k, v) for k, v in merged_state(self.model).items())
        seen: set[int] = set()
        state = {}
        for k, v in items:
            ptr = v.data_ptr()
            if ptr in seen:  # tied embedding / lm_head: ship once
                continue
            seen.add(ptr)
            v = v.detach()
            state[k] = (v.to(cast) if cast is not None and v.is_floating_point() else v).cpu().clone()
        return state

    def set_state(self, state) -> None:
        state = {k: (v if isinstance(v, torch.Tensor) else torch.as_tensor(np.asarray(v))) for k, v in state.items()}
        from opid_rllib.models.lora import adapter_state, is_lora

        if is_lora(self.model):  # a LoRA learner restores its adapters only
            want = {"model." + k for k in adapter_state(self.model)}
            if want - set(state) or set(state) - want:
                raise ValueError(f"LLMRLModule.set_state: a LoRA module takes exactly its adapter tensors; missing "
                                 f"{sorted(want - set(state))[:3]}, unexpected {sorted(set(state) - want)[:3]}")
            self.load_state_dict(state, strict=False)
            return
        from opid_rllib.sharding import is_sharded, load_full_state

        if is_sharded(self.model):  # whole weights in: every rank keeps its slice, rank 0 the whole (get_state)
            whole = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.")}
            load_full_state(self.model, whole)
            if getattr(self, "full_state", None) is not None:
                self.full_state = {k: v.detach().cpu().clone() for k, v in whole.items()}
            return
        if self.inference_only:  # fp32 master weights arrive as bf16/fp16 copies (vLLM gets the same)
            state = {k: v.to(self.compute_dtype) if v.is_floating_point() else v for k, v in state.items()}
        missing, unexpected = self.load_state_dict(state, strict=False)
        tied = {k for k in missing if k.endswith("lm_head.weight")}
        if set(missing) - tied:
            raise ValueError(f"LLMRLModule.set_state: missing keys {sorted(set(missing) - tied)[:5]}")
        if self._backend is not None and getattr(self._backend, "name", "hf") != "hf":
            self._backend.load_state_dict({k[len("model."):]: v for k, v in state.items() if k.startswith("model.")})


def _dropout_off(model) -> int:
    """Zero every dropout of `model` (nn.Dropout layers and the attention modules' `attention_dropout`), as TRL's
    GRPO does by default: training mode is for gradient checkpointing here, and log pi(y | x) must equal the
    sampler's. Returns how many it zeroed (adapters added later keep their own dropout)."""
    import torch

    n = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and module.p:
            module.p, n = 0.0, n + 1
        if isinstance(getattr(module, "attention_dropout", None), float) and module.attention_dropout:
            module.attention_dropout, n = 0.0, n + 1
    return n
