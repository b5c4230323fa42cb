"""Which kernels run a bf16 matmul on this CPU, and whether capping oneDNN's instruction set changes its bits.

Why: the bf16 warm start of the SmolLM2 study rebuilds bit for bit on one kind of CPU and to other weights on
another (docs/STUDIES.md, "Pinning oneDNN's instruction set"). torch hands CPU bf16 matmuls to oneDNN, which picks
kernels by instruction set (AMX tiles on a Xeon with AMX, AVX512-BF16 dot products on an AMD EPYC) unless
ONEDNN_MAX_CPU_ISA caps it. For each cap this runs one bf16 linear layer forward and backward (SmolLM2-135M's MLP
shape) in a fresh process (oneDNN reads the cap once) and prints the kernel oneDNN named, a hash of the output and
gradient bits, and the time of 20 repeats, so a machine's kinds can be compared without a 20-min rebuild.

    python -m studies.onednn_isa                                  # default, AVX512_CORE_BF16, AVX512_CORE
    python -m studies.onednn_isa --caps default,AVX2 --out r.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

PROBE = r"""
import hashlib, json, time, torch
torch.set_num_threads(int(__import__("os").environ.get("PROBE_THREADS", "2")))
torch.manual_seed(0)
a = torch.randn(64, 576).bfloat16()
w = torch.randn(1536, 576).bfloat16().requires_grad_()
y = torch.nn.functional.linear(a, w)
y.float().sum().backward()
bits = y.detach().float().numpy().tobytes() + w.grad.float().numpy().tobytes()
t0 = time.perf_counter()
for _ in range(20):
    w.grad = None
    torch.nn.functional.linear(a, w).float().sum().backward()
print("PROBE " + json.dumps({"bits": hashlib.sha256(bits).hexdigest()[:16], "seconds": time.perf_counter() - t0}))
"""


def probe(cap: str, threads: int) -> dict:
    """One fresh interpreter under `cap` ("default": no cap): the kernel oneDNN reported (None where the matmul
    never reached oneDNN, e.g. a CPU without AVX-512, where ATen runs bf16 itself), the bits' hash and time."""
    from opid_rllib.hardware import ISA_ENV

    env = {k: v for k, v in os.environ.items() if k not in ISA_ENV}
    env.update(ONEDNN_VERBOSE="1", PROBE_THREADS=str(threads))
    if cap != "default":
        env["ONEDNN_MAX_CPU_ISA"] = cap
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"cap {cap}: the probe failed:\n{out.stderr[-2000:]}")
    kernels = sorted({line.split(",")[6] for line in out.stdout.splitlines()
                      if line.startswith("onednn_verbose") and ",exec,cpu,matmul," in line})
    rec = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("PROBE "))[6:])
    return {"cap": cap, "kernels": kernels or None, **rec}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--caps", default="default,AVX512_CORE_BF16,AVX512_CORE",
                   help="comma-separated ONEDNN_MAX_CPU_ISA values; 'default' for no cap")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", help="also write the rows as JSON here")
    args = p.parse_args(argv)
    rows = [probe(c.strip(), args.threads) for c in args.caps.split(",") if c.strip()]
    first = rows[0]["bits"]
    print(f"{'cap':<20} {'oneDNN kernel':<28} {'bits':<17} {'same as ' + rows[0]['cap']:<16} 20 repeats")
    for r in rows:
        kern = ", ".join(r["kernels"]) if r["kernels"] else "(not oneDNN)"
        print(f"{r['cap']:<20} {kern:<28} {r['bits']:<17} {str(r['bits'] == first):<16} {r['seconds']:.3f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"threads": args.threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
