"""`videoseek demo`: the main job on the embedded default, offline, in well under a minute.

1. Synthesizes a small set of seek-worthy videos (`videoseek.envs.synth`).
2. Runs the scripted agents (oracle, uniform, random, no-tool) through `VideoSeekEnv`.
3. Builds the tiny random Qwen2.5-VL offline and runs it through the full model path
   (prompt rendering, generation, parsing, frames appended) when the `model` extra is installed.
4. Prints one row per agent and writes `RUN/summary.json`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

SCRIPTED_AGENTS = ("oracle", "uniform", "random", "no-tool")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run directory")
    parser.add_argument("--n", type=int, default=15, help="synthetic samples (15: three of each task kind)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic set, the episodes and the tiny model")
    parser.add_argument("--reward", default="csgrpo", help="reward preset used to score the episodes")
    parser.add_argument("--model-samples", type=int, default=4, help="samples the tiny model plays (0 skips it)")


def agent_row(trajs: list) -> dict[str, float]:
    from videoseek.agents.evaluate import summarize

    m = summarize(trajs)
    return {k: round(float(m[k] or 0.0), 4) for k in ("accuracy", "coverage", "evidence", "turns", "reward")} | {"episodes": m["episodes"]}


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from videoseek.agents.policy import load_policy
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.run_record import run_record, write_run_record
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import VideoSample
    from videoseek.envs.synth import generate_dataset
    from videoseek.rewards import RewardConfig

    console = Console(soft_wrap=True)  # paths stay whole for copy and paste
    out: Path = args.out
    t0 = time.perf_counter()
    data_dir = out / "data"
    if (data_dir / "samples.jsonl").exists():
        samples = VideoSample.from_jsonl(data_dir / "samples.jsonl")
    if not (data_dir / "samples.jsonl").exists() or len(samples) != args.n:
        samples = generate_dataset(data_dir, n=args.n, seed=args.seed)
    console.print(f"[bold]{len(samples)} synthetic samples[/] in {data_dir} ({time.perf_counter() - t0:.1f}s)")
    config = EnvConfig(reward=RewardConfig(preset=args.reward))

    rows: dict[str, dict[str, Any]] = {}
    for name in SCRIPTED_AGENTS:
        run_dir = out / name
        _fresh(run_dir)
        run_dir.mkdir(parents=True)
        write_run_record(run_dir, run_record("demo", {}, data=[data_dir / "samples.jsonl"], env=config, policy=name, seed=args.seed))
        trajs = run_rollouts(samples, load_policy(name), env_config=config, out_dir=run_dir, seed=args.seed, progress=False)
        rows[name] = agent_row(trajs)

    model_note = None
    if args.model_samples > 0:
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError:
            model_note = "tiny model skipped: install the model extra (pip install -e '.[model]')"
        else:
            from transformers.utils import logging as hf_logging

            from videoseek.agents.tiny_model import build_tiny_model

            hf_logging.disable_progress_bar()  # the weight-loading bars of a 5 MB model are noise here

            model_dir = out / "tiny-model"
            if not (model_dir / "config.json").exists():
                build_tiny_model(model_dir, seed=args.seed)
            decoding = {"seed": args.seed, "max_new_tokens": 48, "temperature": 1.0}
            policy = load_policy(f"hf:{model_dir}", device="cpu", **decoding)
            run_dir = out / "tiny-model-run"
            _fresh(run_dir)
            model_config = config.model_copy(update={"max_turns": 3})
            write_run_record(run_dir, run_record("demo", {}, data=[data_dir / "samples.jsonl"], env=model_config, policy=f"hf:{model_dir}",
                                                 seed=args.seed, model=model_dir, decoding=decoding))
            trajs = run_rollouts(samples[: args.model_samples], policy, env_config=model_config, out_dir=run_dir, seed=args.seed, progress=False)
            rows["tiny-qwen2.5-vl"] = agent_row(trajs)
            model_note = (
                "tiny-qwen2.5-vl is a randomly initialised model: it exercises the model path (rendering, generation, "
                "parsing, frames appended) and scores at or below chance, since it rarely writes a parseable answer."
            )

    table = Table(title=f"VideoSeek demo — {len(samples)} samples, reward preset {args.reward}")
    for col in ("agent", "accuracy", "coverage", "evidence", "turns", "reward", "episodes"):
        table.add_column(col, justify="left" if col == "agent" else "right")
    for name, r in rows.items():
        table.add_row(name, *(f"{r[k]:.2f}" if k != "episodes" else str(r[k]) for k in ("accuracy", "coverage", "evidence", "turns", "reward", "episodes")))
    console.print(table)
    if model_note:
        console.print(model_note)
    summary = {"agents": rows, "samples": len(samples), "reward_preset": args.reward, "seconds": round(time.perf_counter() - t0, 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    console.print(f"Trajectories: {out}/<agent>/trajectories.jsonl — replay them with `videoseek view {out / 'oracle'}`")
    console.print(f"Summary: {out / 'summary.json'} ({summary['seconds']}s)")
    return 0


def _fresh(run_dir: Path) -> None:
    """Start a run directory anew (the demo is a fixed recipe, not a resumable job)."""
    import shutil

    if run_dir.exists():
        shutil.rmtree(run_dir)
