"""Seeds, deterministic kernels and thread counts for the training entry points (one call, first thing).

`make_deterministic` pins the CPU kernels to one instruction set (`agents.cpu_kernels`), seeds
torch's generators, asks torch for deterministic algorithms (on CUDA also a fixed cuBLAS
workspace and no cuDNN autotuning) and fixes the CPU thread count. A kernel
without a deterministic version warns instead of stopping the run (`warn_only`), so a GPU run
says which op may differ between reruns. What each backend then repeats: docs/training.md,
"Reproducible runs".
"""

from __future__ import annotations

import os
from typing import Any


def make_deterministic(seed: int, threads: int | None = None) -> dict[str, Any]:
    """Seed torch, request deterministic algorithms, fix the threads; returns what was set (for run.json)."""
    # cuBLAS reads this when it starts: set before the first CUDA matmul (a no-op on CPU).
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    from videoseek.agents.cpu_kernels import pin_cpu_kernels

    cpu = pin_cpu_kernels()  # before any tensor op: the kernels are chosen at the first one

    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    return {"seed": seed, "torch_threads": torch.get_num_threads(), "deterministic_algorithms": True,
            "cublas_workspace_config": os.environ["CUBLAS_WORKSPACE_CONFIG"], "cpu_kernels": cpu}  # fmt: skip
