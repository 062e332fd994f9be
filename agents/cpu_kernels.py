"""The same CPU kernels on every x86 machine, so a seeded CPU run gives the same numbers elsewhere.

torch picks its CPU kernels by the best instruction set the processor offers: ATen's vectorised
ops, oneDNN and MKL each have AVX2 and AVX-512 versions, and they sum in different orders.
Measured on an AVX-512 machine (12 steps of `make learn`'s SFT, one thread): ATen at AVX2 instead
of AVX-512 changed the loss in the 7th digit, oneDNN at AVX2 changed the gradient norm; over 720
steps such bits can grow (docs/training.md, "Reproducible runs"). `pin_cpu_kernels` asks all
three for their AVX2 kernels, which every x86 server of the last ten years runs, so the choice no
longer depends on the machine. The pins are environment variables the libraries read once, when
they first pick a kernel: call it before the first tensor op. A variable already set is kept (a
user who wants AVX-512 sets ATEN_CPU_CAPABILITY=avx512). The synthetic videos need no pin: x264's
output was the same with every instruction set from SSSE3 to AVX-512.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings
from typing import Any

# torch.backends.cpu.get_cpu_capability() reports ATen's choice; MKL and oneDNN report none.
LEVELS = ["DEFAULT", "AVX2", "AVX512"]  # ATen's x86 capabilities, lowest first
CPU_KERNEL_PINS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "AVX2"}


def pin_cpu_kernels() -> dict[str, Any]:
    """Set the pins (keeping any the user set), then return `cpu_kernels()`; warns if ATen chose earlier."""
    for name, value in CPU_KERNEL_PINS.items():
        os.environ.setdefault(name, value)
    import torch  # noqa: F401  (cpu_kernels reads it from sys.modules)

    record = cpu_kernels()
    # Above the pin means ATen chose before the variable was set (a machine without AVX2 falls below it).
    have, want = record["capability"], os.environ["ATEN_CPU_CAPABILITY"].upper()
    if have in LEVELS and want in LEVELS and LEVELS.index(have) > LEVELS.index(want):
        warnings.warn(f"ATen chose its {have} kernels before pin_cpu_kernels ran (a tensor op came first), "
                      "so this run's CPU numbers may differ on another machine", stacklevel=2)  # fmt: skip
    return record


def cpu_kernels() -> dict[str, Any] | None:
    """{"processor", "capability": ATen's kernels, and the three pin variables as set}; None when torch is not loaded."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {"processor": processor_name(), "capability": torch.backends.cpu.get_cpu_capability(),
            **{name: os.environ.get(name) for name in CPU_KERNEL_PINS}}  # fmt: skip


def processor_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo, else `platform.processor()`): which machine a run's numbers came from."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
