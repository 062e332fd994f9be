"""Bit-for-bit reruns: the same command in fresh processes gives the same bytes.

Each run is a fresh subprocess with its own PYTHONHASHSEED; the synth runs also give glibc's
MALLOC_PERTURB_ different values, so a read of uninitialised memory (x264's macroblock tree was
one: docs/training.md) changes the output every time instead of in a few percent of the runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


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


def script(path: str, args: list[str], hash_seed: int, cwd: Path) -> None:
    """Run a training script as a file, the way docs/training.md runs it, in a new process."""
    full = {**os.environ, "PYTHONHASHSEED": str(hash_seed), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(REPO / path), *args], cwd=cwd, env=full, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


REPO = Path(__file__).resolve().parents[2]


def steps(metrics: Path) -> list[dict]:
    """metrics.jsonl without its wall-clock fields."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [{k: v for k, v in r.items() if not (k.startswith("time") or k.startswith("gpu/"))} for r in rows]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from videoseek.agents.tiny_model import ensure_tiny_model

    return ensure_tiny_model(cache_dir=tmp_path_factory.mktemp("models"))


def test_two_short_sft_runs_give_identical_checkpoints_and_metrics(tmp_path, tiny, index_video):
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.scripted import SweepPolicy
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import VideoSample
    from videoseek.training.exports.sft import export_sft
    from videoseek.training.local_backend.rollout import RecordingPolicy

    samples = [VideoSample(id=f"q{k}", video=str(index_video), question=q, options=["A. red", "B. green"], answer="B", clue_intervals=[(12.0, 13.5)])
               for k, q in enumerate(["Which colour flashes?", "What colour is the lamp?", "Which lamp colour shows?"])]  # fmt: skip
    env = EnvConfig(initial_frames=2, frames_per_call=2, max_turns=3, max_total_frames=8, max_pixels=64 * 64)
    run_rollouts(samples, RecordingPolicy(SweepPolicy(windows=2)), env_config=env, out_dir=tmp_path / "traces", progress=False)
    [parquet] = export_sft([tmp_path / "traces"], tmp_path / "sft_data", only_correct=False)
    for k in (1, 2):
        script("training/run_sft.py", ["--model", str(tiny), "--data", str(parquet), "--val-data", str(parquet), "--out", str(tmp_path / f"sft{k}"),
                                       "--max-steps", "4", "--batch-size", "2", "--lr", "1e-3", "--threads", "1"], hash_seed=k, cwd=tmp_path)  # fmt: skip
    first, second = tmp_path / "sft1", tmp_path / "sft2"
    assert digests(first / "checkpoint") == digests(second / "checkpoint")
    assert "model.safetensors" in digests(first / "checkpoint")
    rows = steps(first / "metrics.jsonl")
    assert rows == steps(second / "metrics.jsonl") and [r["step"] for r in rows] == [1, 2, 3, 4] and "val_loss" in rows[-1]
    record = json.loads((first / "run.json").read_text())
    assert record["command"] == "sft" and record["data_files"][0]["sha256"] and record["model"]["weights_sha256"]
    assert record["determinism"]["deterministic_algorithms"] and record["determinism"]["torch_threads"] == 1
    assert_pinned(record["determinism"]["cpu_kernels"])


def test_two_three_step_local_grpo_runs_give_identical_metrics(tmp_path, tiny, index_sample):
    pytest.importorskip("verl")
    import yaml

    from videoseek.envs.sample import write_jsonl

    reference = "<think>At 12.5s the ball is green. The frames at 3.0s and 8.0s do not show the ball, so I look between 11.0s and 14.0s.</think>"
    data = write_jsonl([index_sample.model_copy(update={"reference_reasoning": reference})], tmp_path / "samples.jsonl")
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump({
        "max_turn_tokens": 16, "group_size": 3, "batch_size": 1,
        "env": {"initial_frames": 2, "frames_per_call": 2, "max_turns": 2, "max_total_frames": 8, "max_pixels": 112 * 112},
    }))  # fmt: skip
    for k in (1, 2):
        script("training/run_csgrpo.py", ["--backend", "local", "--model", str(tiny), "--data", str(data), "--steps", "3", "--reward", "prr",
                                          "--config", str(config), "--out", str(tmp_path / f"grpo{k}"), "--threads", "1"], hash_seed=k, cwd=tmp_path)  # fmt: skip
    rows = steps(tmp_path / "grpo1" / "metrics.jsonl")
    assert rows == steps(tmp_path / "grpo2" / "metrics.jsonl") and [r["step"] for r in rows] == [1, 2, 3]
    assert rows[0]["grad_norm"] > 0  # a run that learns something, not three skipped steps
    record = json.loads((tmp_path / "grpo1" / "run.json").read_text())
    assert record["command"] == "grpo" and record["decoding"]["max_new_tokens"] == 16 and record["model"]["weights_sha256"]
    assert_pinned(record["determinism"]["cpu_kernels"])
    assert record["software"]["cpu_kernels"] == record["determinism"]["cpu_kernels"]


def assert_pinned(cpu: dict) -> None:
    """The run chose AVX2 kernels, not the machine's best: the pins were set before the first tensor op."""
    from videoseek.agents.cpu_kernels import CPU_KERNEL_PINS

    assert {k: cpu[k] for k in CPU_KERNEL_PINS} == CPU_KERNEL_PINS
    assert cpu["capability"] != "AVX512"  # what an AVX-512 machine (this project's) chooses unpinned


def test_a_pin_after_the_first_tensor_op_warns_when_it_came_too_late():
    code = ("import os, warnings, torch\n"
            "for k in ('ATEN_CPU_CAPABILITY', 'ONEDNN_MAX_CPU_ISA', 'MKL_CBWR'): os.environ.pop(k, None)\n"
            "best = torch.backends.cpu.get_cpu_capability()\n"  # this call fixes ATen's choice, as a first op does
            "from videoseek.agents.cpu_kernels import pin_cpu_kernels\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    record = pin_cpu_kernels()\n"
            "print(best, record['capability'], len(caught))")
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    best, chosen, warned = done.stdout.split()
    assert chosen == best and int(warned) == (best == "AVX512")
