"""Bit-for-bit reruns: the same command in fresh processes gives the same bytes.

Each run is a fresh subprocess with its own PYTHONHASHSEED; the synth runs also give glibc's
MALLOC_PERTURB_ different values, so a read of uninitialised memory (x264's macroblock tree was
one: docs/training.md) changes the output every time instead of in a few percent of the runs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path


def fresh(args: list[str], hash_seed: int, cwd: Path, **env: str) -> None:
    """Run `python -m videoseek ARGS` in a new process with PYTHONHASHSEED=hash_seed."""
    full = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "OMP_NUM_THREADS": "1", **env}
    done = subprocess.run([sys.executable, "-m", "videoseek", *args], cwd=cwd, env=full, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_synth_in_two_processes_gives_identical_bytes(tmp_path):
    # Seed 1's flash_colour set as `make learn` makes it: with x264's mbtree on, 4 of these 48
    # videos differed between MALLOC_PERTURB_=77 and 165.
    cmd = ["synth", "--n", "48", "--seed", "1", "--kinds", "flash_colour", "--min-duration", "10", "--max-duration", "10", "--avoid-uniform", "4"]
    for k, perturb in ((1, "77"), (2, "165")):
        fresh([*cmd, "--out", str(tmp_path / f"run{k}")], hash_seed=k, cwd=tmp_path, MALLOC_PERTURB_=perturb)
    first, second = digests(tmp_path / "run1"), digests(tmp_path / "run2")
    assert len(first) == 49 and first == second
