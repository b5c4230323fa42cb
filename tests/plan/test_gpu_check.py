"""bench/gpu_check.py (`python -m bench.gpu_check`) runs without Ray (blocked in a subprocess) and its checks say what they claim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# `python -m bench.gpu_check` with Ray blocked, from the repository root and without PYTHONPATH, as on the GPU
# machine (no package installed there: the root is what finds opid_rllib)
BLOCK_RAY = ("import sys, runpy; sys.modules['ray'] = None; sys.argv = ['gpu_check.py'] + sys.argv[1:]; "
             "runpy.run_module('bench.gpu_check', run_name='__main__', alter_sys=True)")


@pytest.mark.slow  # a subprocess that imports torch/Ray: seconds each
def test_gpu_check_runs_ray_free_on_cpu(tmp_path):
    pytest.importorskip("peft")
    out = tmp_path / "check.json"
    r = subprocess.run([sys.executable, "-c", BLOCK_RAY, "--device", "cpu", "--batch", "2", "--prompt-len", "24",
                        "--response-len", "6", "--out", str(out)], capture_output=True, text=True, timeout=600,
                       cwd=REPO, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no CUDA device: running on CPU" in r.stderr
    rep = json.loads(out.read_text())
    assert rep["device"] == "cpu" and rep["ray_imported"] is False
    full, lora = rep["full_finetune"], rep["lora"]
    assert full["master_dtype"] == "torch.float32" and full["grads_finite"]
    # A 1e-6 AdamW step moves (nearly) every fp32 master weight but only a few bf16 ones.
    assert full["fraction_of_weights_moved_by_step2"] > 0.9
    assert rep["bf16_params_baseline"]["fraction_of_weights_moved_by_step2"] < 0.2
    assert 0 < full["score_max_abs_diff_bf16_copy_vs_fp32_master"] < 0.1
    # LoRA: adapters move, the base does not, and adapters-off is exactly the base (the KL reference).
    assert lora["base_weights_changed"] == 0 and lora["fraction_of_adapter_weights_moved_by_step2"] > 0.5
    assert lora["adapters_off_max_abs_diff_vs_base"] == 0.0 < lora["adapters_on_max_abs_diff_vs_base"]
    assert rep["plan_estimate_gib"]["full_finetune"]["rows"]["weights"] > 0
    # The single-rank FSDP2 step: one shard per block then the root, the same step as unsharded up to bf16
    # rounding; no weight further from the plain step's than a sign flip of one lr-1e-6 AdamW step.
    fsdp = rep["fsdp_single_rank"]
    assert fsdp["blocks"] == 4  # the tiny model's decoder blocks
    assert fsdp["loss"]["fsdp"] == pytest.approx(fsdp["loss"]["plain"], rel=1e-2)
    assert fsdp["grad_norm"]["fsdp"] == pytest.approx(fsdp["grad_norm"]["plain"], rel=2e-2)
    assert fsdp["weights_max_abs_diff_vs_plain"] < 2.5e-6 and fsdp["gather_seconds"] > 0


def test_gpu_check_and_cuda_tests_import_no_ray():
    """Importing the check and collecting tests/gpu with `ray` blocked must not fail."""
    code = ("import sys; sys.modules['ray'] = None; import runpy; "
            "runpy.run_module('bench.gpu_check'); "
            "import pytest; sys.exit(pytest.main(['-q', '--collect-only', '-p', 'no:cacheprovider', "
            f"{str(REPO / 'tests' / 'gpu')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "test_cuda_paths.py" in r.stdout
