"""Benchmark: a transformers policy's rollouts with the turn cache against whole-prompt prefills.

`TransformersPolicy(reuse_kv=True)` (the default) continues each episode's turn from the keys and
values of its last turn (`agents.hf_policy.TurnCache`), so a turn prefills only its new messages;
`reuse_kv=False` prefills the whole conversation every turn. Both play the same held-out
questions greedily, one after the other, twice (alternating which goes first); the script prints
each wall time, the ratio and whether the episodes were the same token for token.

By default the tiny random model plays synthetic flash-colour questions (built offline here): its
turns are malformed, so every episode runs to `--max-turns` and the tool's replies carry no frames.
`--model` takes a checkpoint that searches (e.g. `make learn`'s runs/learn/sft/checkpoint) and
`--data` its held-out samples.jsonl: crops then bring frames into the continued turns.

    python bench/bench_turn_cache.py [--n 48] [--threads 2] [--model PATH --data SAMPLES.jsonl]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=48, help="questions (one episode each)")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--model", default=None, help="checkpoint folder (default: the tiny random Qwen2.5-VL, built here)")
    p.add_argument("--data", default=None, help="samples.jsonl (default: synthetic flash-colour questions, built here)")
    p.add_argument("--max-turns", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=48)
    args = p.parse_args()

    import torch

    from videoseek.agents.hf_policy import TransformersPolicy
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.tiny_model import build_tiny_model
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import VideoSample
    from videoseek.envs.synth import generate_dataset

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_turn_cache_"))
    model = args.model or build_tiny_model(tmp / "model", seed=0)
    if args.data:
        samples = VideoSample.from_jsonl(args.data)[: args.n]
    else:
        samples = generate_dataset(tmp / "data", n=args.n, seed=2, kinds=("flash_colour",), avoid_uniform=(4,), min_duration=10, max_duration=10)
    config = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=args.max_turns, max_total_frames=24, max_pixels=12544)
    policies = {reuse: TransformersPolicy(model, max_new_tokens=args.max_new_tokens, temperature=0.0, reuse_kv=reuse) for reuse in (True, False)}
    run_rollouts(samples[:2], policies[True], env_config=config, progress=False)  # warm-up: first-call allocations
    cache = policies[True].turn_cache
    cache.reused_tokens = cache.prefilled_tokens = 0
    seconds: dict[bool, list[float]] = {True: [], False: []}
    played: dict[bool, list] = {}
    for order in ((True, False), (False, True)):
        for reuse in order:
            t0 = time.perf_counter()
            trajs = run_rollouts(samples, policies[reuse], env_config=config, progress=False)
            seconds[reuse].append(time.perf_counter() - t0)
            played[reuse] = [[turn.assistant for turn in t.turns] for t in trajs]
    turns = sum(len(t) for t in played[True])
    print(f"{len(samples)} episodes, {turns} turns, {args.threads} threads, model {model}")
    print(f"prompt tokens per pass with the cache: {cache.reused_tokens // 2} reused, {cache.prefilled_tokens // 2} prefilled")
    for reuse in (True, False):
        print(f"{'turn cache' if reuse else 'whole prefill':>14}: " + ", ".join(f"{s:.1f} s" for s in seconds[reuse]))
    print(f"ratio (whole / cache, best of 2): {min(seconds[False]) / min(seconds[True]):.2f}x")
    print(f"same episodes token for token: {played[True] == played[False]}")


if __name__ == "__main__":
    main()
