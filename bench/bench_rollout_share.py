"""Benchmark: share of a model rollout's wall time spent in the env versus in the model.

The tiny random Qwen2.5-VL plays the synthetic set through `run_rollouts` (G episodes per
sample, batched generation). Time inside `policy.act` (prompt rendering with the processor,
generation) is the model's; the rest of the wall time is the env's and the runner's (decode,
parsing, evidence, rewards, trajectory records). Target (DESIGN.md): env share under 5%.

Two runs, measured side by side:
- `tiny model`: the random model's own turns (mostly malformed text: few crops, cheap steps);
- `tiny model + oracle actions`: the model generates each turn as usual, then the oracle's turn
  replaces its text, so the env decodes crops at the rate a trained seeker would.

    python bench/bench_rollout_share.py [--n 10] [--group-size 4] [--max-new-tokens 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from videoseek.agents.hf_policy import TransformersPolicy  # noqa: E402
from videoseek.agents.rollout import run_rollouts  # noqa: E402
from videoseek.agents.scripted import OraclePolicy  # noqa: E402
from videoseek.agents.tiny_model import build_tiny_model  # noqa: E402
from videoseek.envs import video as video_mod  # noqa: E402
from videoseek.envs.env import EnvConfig  # noqa: E402
from videoseek.envs.synth import generate_dataset  # noqa: E402
from videoseek.rewards import RewardConfig  # noqa: E402


class Timed:
    """Wraps a policy and adds up the wall time spent inside `act`."""

    def __init__(self, policy, replace_with=None):
        self.policy, self.replace_with = policy, replace_with
        self.name = policy.name
        self.seconds = 0.0
        self.replacing = 0.0  # the oracle stand-in's own time (it reads pixels): neither model nor env

    def act(self, batch):
        t0 = time.perf_counter()
        outs = self.policy.act(batch)
        t1 = time.perf_counter()
        self.seconds += t1 - t0
        if self.replace_with is not None:
            outs = self.replace_with.act(batch)
            self.replacing += time.perf_counter() - t1
        return outs


def measure(samples, policy, config, group_size):
    video_mod.FRAME_CACHE.clear()
    video_mod._READERS.clear()
    t0 = time.perf_counter()
    trajs = run_rollouts(samples, policy, group_size=group_size, env_config=config, progress=False)
    wall = time.perf_counter() - t0 - policy.replacing
    crops = sum(len(t.calls) for t in trajs)
    return wall, policy.seconds, crops, len(trajs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="videoseek-bench-"))
    samples = generate_dataset(tmp / "data", n=args.n, seed=0)
    model_dir = build_tiny_model(tmp / "tiny", seed=0)
    config = EnvConfig(reward=RewardConfig(preset="csgrpo"), max_turns=4)
    model = TransformersPolicy(model_dir, max_new_tokens=args.max_new_tokens, temperature=1.0)
    for label, policy in (("tiny model", Timed(model)), ("tiny model + oracle actions", Timed(model, replace_with=OraclePolicy()))):
        wall, model_s, crops, episodes = measure(samples, policy, config, args.group_size)
        share = (wall - model_s) / wall
        print(f"[{label}] {episodes} episodes, {crops} crops: wall {wall:.2f}s, model {model_s:.2f}s, "
              f"env+runner {wall - model_s:.2f}s -> env share {share:.1%} (target < 5%) {'OK' if share < 0.05 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
