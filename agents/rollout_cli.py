"""`videoseek rollout`: run a policy over a dataset and write `RUN/trajectories.jsonl`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, required=True, help="samples.jsonl")
    parser.add_argument("--policy", default="oracle", help="oracle | uniform | random | no-tool | hf:PATH | vllm:PATH")
    parser.add_argument("--out", type=Path, required=True, help="run directory (resumable: finished samples are skipped)")
    parser.add_argument("--group-size", type=int, default=1, help="episodes per sample (G)")
    parser.add_argument("--perturb", action="append", default=[], choices=["mask", "shuffle", "blend"],
                        help="also run a perturbed group: mask (DM-GRPO), shuffle (T-GRPO), blend (SF-GRPO); repeatable")  # fmt: skip
    parser.add_argument("--reward", default="default", help="reward preset (see videoseek.rewards.RewardConfig)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-turns", type=int, default=None)
    parser.add_argument("--max-pixels", type=int, default=None)
    parser.add_argument("--device", default="cpu", help="model policies: cpu or cuda")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="model policies: tokens per turn")
    parser.add_argument("--temperature", type=float, default=1.0, help="model policies: sampling temperature")
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    from videoseek.agents.evaluate import summarize
    from videoseek.agents.rollout import load_policy, run_rollouts
    from videoseek.cli import UserError
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import VideoSample
    from videoseek.rewards import RewardConfig

    samples = VideoSample.from_jsonl(args.data)
    if args.limit:
        samples = samples[: args.limit]
    if args.group_size < 1:
        raise UserError("--group-size must be at least 1")
    try:
        reward = RewardConfig(preset=args.reward)
    except ValueError as exc:  # pydantic's ValidationError names the preset and the choices
        raise UserError(f"--reward: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}") from None
    overrides = {k: v for k, v in (("max_turns", args.max_turns), ("max_pixels", args.max_pixels)) if v is not None}
    config = EnvConfig(reward=reward, **overrides)
    kwargs = {}
    if ":" in args.policy:
        kwargs = {"device": args.device, "max_new_tokens": args.max_new_tokens, "temperature": args.temperature}
    try:
        policy = load_policy(args.policy, **kwargs)
    except (ValueError, OSError) as exc:
        raise UserError(str(exc).splitlines()[0]) from None
    args.out.mkdir(parents=True, exist_ok=True)
    # What the run was made from: the viewer's play mode finds the dataset here.
    (args.out / "run.json").write_text(json.dumps({
        "data": [str(args.data.resolve())], "policy": args.policy, "group_size": args.group_size,
        "perturbations": args.perturb, "reward": args.reward, "seed": args.seed, "env": config.model_dump(mode="json"),
    }, indent=2))  # fmt: skip
    trajs = run_rollouts(samples, policy, group_size=args.group_size, perturbations=args.perturb, env_config=config,
                         out_dir=args.out, seed=args.seed, progress=not args.no_progress)  # fmt: skip
    m = summarize(trajs) if trajs else {}
    print(json.dumps({k: m.get(k) for k in ("episodes", "accuracy", "coverage", "evidence", "calls", "reward", "failures")}))
    print(f"trajectories: {args.out / 'trajectories.jsonl'}")
    return 0
