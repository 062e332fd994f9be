"""Benchmark: peak memory of `run_rollouts` does not grow with the number of episodes.

Episodes are planned as the batch has room and each finished group releases its frames (the
env's and the conversation's); with `keep=False` (how `videoseek rollout` runs) the trajectories
go only to `on_episode`, so a long run holds only the live batch. The `uniform` scripted agent (4 crops of 8 frames per episode, so 40 frames
an episode) plays N episodes in groups of 4 over a small synthetic set, once with N and once with
10 N, each in a fresh process, and the peak RSS of both is printed side by side with their ratio
(target: within 1.2x).

    python bench/bench_rollout_memory.py [--episodes 200] [--samples 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def child(data: Path, episodes: int, samples: int) -> None:
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.scripted import UniformPolicy
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import VideoSample

    videos = VideoSample.from_jsonl(data)[:samples]
    # Groups of G = 4 as in training; more episodes means more questions (each video asked again
    # under another id), since a group's frames are released only once the whole group is done.
    rows = [videos[k % len(videos)].model_copy(update={"id": f"q{k}"}) for k in range(episodes // 4)]
    t0 = time.perf_counter()
    rewards: list[float] = []  # what a caller keeps when streaming: one number per episode
    run_rollouts(rows, UniformPolicy(), group_size=4, env_config=EnvConfig(), progress=False, keep=False,
                 on_episode=lambda t: rewards.append(t.reward))  # fmt: skip
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"episodes": len(rewards), "peak_rss_mb": round(peak_mb, 1), "seconds": round(time.perf_counter() - t0, 1)}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=200, help="the smaller run (the larger is 10x)")
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--child", nargs=2, metavar=("DATA", "EPISODES"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(Path(args.child[0]), int(args.child[1]), args.samples)
        return
    from videoseek.envs.synth import generate_dataset

    tmp = Path(tempfile.mkdtemp(prefix="videoseek-bench-"))
    generate_dataset(tmp, n=args.samples, seed=0, max_duration=30)
    results = []
    for n in (args.episodes, 10 * args.episodes):
        out = subprocess.run([sys.executable, __file__, "--samples", str(args.samples), "--child", str(tmp / "samples.jsonl"), str(n)],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        results.append(json.loads(out.strip().splitlines()[-1]))
    small, large = results
    print(f"{'episodes':>10} {'peak RSS MB':>12} {'seconds':>8}")
    for r in results:
        print(f"{r['episodes']:>10} {r['peak_rss_mb']:>12.1f} {r['seconds']:>8.1f}")
    print(f"peak RSS ratio {large['episodes']} / {small['episodes']} episodes: {large['peak_rss_mb'] / small['peak_rss_mb']:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
