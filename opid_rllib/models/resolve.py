"""Model specs -> local HF folders that work offline: "tiny", "smollm2-135m", local folders,
hub ids already in the Hugging Face cache (the project machines reach PyPI but not the hub)."""

from __future__ import annotations

from pathlib import Path

from opid_rllib.models.cache import ModelResolutionError, _build_cached, default_cache_dir
from opid_rllib.models.smollm2 import SMOLLM2_DIRNAME, SMOLLM2_INSTALL, _convert_smollm2, smollm2_gguf_path
from opid_rllib.models.tiny import TINY_VERSION, _tiny_fingerprint, build_tiny_model


def resolve_model(spec, cache_dir=None) -> Path:
    """Turn a model spec into a local HF folder: "tiny" | "smollm2-135m" | local dir | cached hub id."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    s = str(spec).strip()
    if s == "tiny":
        return _build_cached(cache / "models" / f"{TINY_VERSION}-{_tiny_fingerprint()}", build_tiny_model)
    if s.lower() in ("smollm2-135m", "smollm2", "smollm2-135m-instruct"):
        smollm2_gguf_path()  # clear error before any work
        return _build_cached(cache / "models" / SMOLLM2_DIRNAME, _convert_smollm2)
    local = Path(s).expanduser()
    if local.is_dir():
        if (local / "config.json").exists():
            return local
        raise ModelResolutionError(f"model path {local} exists but has no config.json (not a HF model folder)")
    if local.exists() or s.startswith((".", "/", "~")):
        raise ModelResolutionError(f"model path {s!r} is not a model folder")
    return _resolve_hub_id(s)


def node_model_path(model_config: dict) -> str:
    """The policy's folder on this node: the driver's resolved `model_path` where this node sees it, else the spec
    (`model_spec`) resolved here, into this node's own cache ("tiny" is rebuilt byte-identically, a hub id comes
    from this node's HF cache). Why: a Ray cluster's nodes share no disk, and the driver's cache is its own."""
    path, spec = model_config.get("model_path"), model_config.get("model_spec")
    if path and (Path(path) / "config.json").exists():
        return str(path)
    if spec is None or Path(str(spec)).expanduser().is_absolute():
        raise ModelResolutionError(f"model folder {path!r} is not on this node ({_node_name()}): a local folder must "
                                   "be at the same path on every node of the cluster (or use a hub id or 'tiny')")
    return str(resolve_model(spec))


def _node_name() -> str:
    import socket

    return socket.gethostname()


def _resolve_hub_id(repo_id: str) -> Path:
    err = None
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(repo_id, local_files_only=True))
        if (path / "config.json").exists():
            return path
    except Exception as e:  # noqa: BLE001 - any failure means "not usable offline"
        err = f"{type(e).__name__}"
    raise ModelResolutionError(
        f"model {repo_id!r} is not a local folder and is not in the Hugging Face cache "
        f"({err or 'no config.json'}); the HF hub is unreachable from this machine. "
        "Use model='tiny', model='smollm2-135m' (" + SMOLLM2_INSTALL + "), or pass the path of a "
        "local Hugging Face model folder (config.json + weights + tokenizer).")


def load_tokenizer(path):
    """AutoTokenizer with a pad token guaranteed (falls back to eos) — batching needs one."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(path, dtype: str = "float32"):
    """AutoModelForCausalLM in the given dtype ("float32", "bfloat16"/"bf16", "auto", or a torch.dtype), without
    transformers' "Loading weights" bar: a run loads the policy in every runner and learner, and the bars (four
    on the CPU example) bury the run's own output."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    if isinstance(dtype, str):
        name = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}.get(dtype, dtype)
        torch_dtype = name if name == "auto" else getattr(torch, name)
    else:
        torch_dtype = dtype
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
