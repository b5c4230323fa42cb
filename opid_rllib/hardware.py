"""Whether this CPU computes in bf16 in hardware, so that `--dtype bfloat16` on a CPU that lacks it is flagged.

Why: bf16 pays off on CPUs with AVX512-BF16 or AMX (machine D: 0.58-0.75x of float32's time, docs/STUDIES.md, "bf16 on
this CPU"), but where they are missing torch emulates bf16 matmuls in software. On an AVX2-only AMD EPYC, one
optimizer step of SmolLM2-135M's skill-literate SFT took 8 min at bf16 against seconds on machine D, so a study
that fits in hours would take days, with nothing said. The CLIs print `bf16_cpu_warning` before they start work;
bench/dtype_speed.py measures the two dtypes side by side on any machine.
"""

from __future__ import annotations

from pathlib import Path

# CPU flags (Linux /proc/cpuinfo: x86 "flags", aarch64 "Features") under which bf16 matmuls run in hardware.
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def cpuinfo_value(keys: tuple[str, ...], text: str | None = None) -> str | None:
    """The first /proc/cpuinfo line's value under one of `keys` (the text read when not given); None where there
    is none or the file cannot be read (another OS)."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in keys:
            return value.strip()
    return None


def cpu_flags(text: str | None = None) -> frozenset[str] | None:
    """The CPU's feature flags (x86 "flags", aarch64 "Features"); None where they cannot be read."""
    value = cpuinfo_value(("flags", "Features"), text)
    return None if value is None else frozenset(value.split())


def bf16_cpu_warning(dtype: str, on_cpu: bool = True, flags: frozenset[str] | None = None) -> str | None:
    """A one-line warning where `dtype` is bf16, the work runs on the CPU and its flags show no bf16 hardware.

    None otherwise, and where the flags are unknown (another OS): say nothing rather than guess.
    """
    if dtype not in ("bfloat16", "bf16") or not on_cpu:
        return None
    flags = cpu_flags() if flags is None else flags
    if flags is None or any(f in flags for f in BF16_FLAGS):
        return None
    return ("warning: --dtype bfloat16 on a CPU without AVX512-BF16 or AMX (no "
            f"{'/'.join(BF16_FLAGS)} in /proc/cpuinfo): torch emulates bf16 matmuls in software here, many times "
            "slower than float32; pass --dtype float32 (python -m bench.dtype_speed measures both on this machine)")


# oneDNN's cap on the instruction set its kernels may use (oneDNN reads ONEDNN_MAX_CPU_ISA, or the older
# DNNL_MAX_CPU_ISA, once, when torch first calls it).
ISA_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def numerics_record(text: str | None = None) -> dict:
    """The machine a CPU run's rounding depends on, written beside its weights (`sft_stats.json`: machine).

    Why: the same recipe, seed and thread count rebuild a warm start bit for bit on one kind of CPU, and other
    weights on another: torch runs bf16 matmuls in oneDNN, whose kernels differ by instruction set (AMX tiles on a
    Xeon with AMX, AVX512-BF16 dot products on an AMD EPYC), and float32 ones in MKL and ATen's AVX2 or AVX-512
    code. Capping oneDNN at another CPU's kernels did not rebuild that CPU's weights (docs/STUDIES.md, "Pinning
    oneDNN's instruction set"), so the record names the CPU itself: a study's runs must start from one base, and
    only a CPU of the same kind rebuilds it.
    """
    import os

    import torch

    flags = cpu_flags(text)
    return {"cpu_model": cpuinfo_value(("model name",), text),
            "bf16_flags": None if flags is None else sorted(f for f in BF16_FLAGS if f in flags),
            "torch": torch.__version__, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "torch_threads": torch.get_num_threads(),
            "onednn_max_cpu_isa": next((os.environ[k] for k in ISA_ENV if os.environ.get(k)), None)}
