#!/usr/bin/env python3
"""Steady GPU load for tests/gpu/validate.py: a PyTorch bf16 matmul loop.

Prints `pid=<pid>` first, `ready` once the operands are allocated and the
kernels warmed up, and `done iters=<n> seconds=<s> tflops=<t>` at the end.
Runs on the first visible CUDA device (validate.py sets CUDA_VISIBLE_DEVICES
to the UUID of the GPU under test).
"""

import argparse
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=30.0, help="how long to run the loop")
    p.add_argument("--size", type=int, default=8192, help="square matrix size")
    args = p.parse_args()

    print(f"pid={os.getpid()}", flush=True)
    try:
        import torch
    except ImportError as e:
        print(f"load.py: PyTorch is not installed: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("load.py: torch.cuda.is_available() is False", file=sys.stderr)
        return 2

    n = args.size
    dev = torch.device("cuda")
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(10):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    print(f"ready device={torch.cuda.get_device_name(0)}", flush=True)

    iters = 0
    start = time.monotonic()
    end = start + args.seconds
    while time.monotonic() < end:
        for _ in range(20):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        iters += 20
    elapsed = time.monotonic() - start
    tflops = 2.0 * n**3 * iters / elapsed / 1e12 if elapsed > 0 else 0.0
    print(f"done iters={iters} seconds={elapsed:.1f} tflops={tflops:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
