"""Benchmark: concurrent episodes on one video with the shared reader vs. a reader per episode.

N episodes of one sample run on T threads, all alive at once as a batch of live episodes is:
each env is built, reset (8 sparse frames) and makes 3 crops at seeded random spans. Two runs,
each in its own child process so that peak RSS is its own, measured side by side:

- `shared reader`: what `open_video` does now, one decoder per file under a lock;
- `reader per episode`: every env opens its own `VideoReader`, which is what racing threads got
  from the pool before it locked opens (issue 13: 256 episodes on 32 threads peaked at 3.4 GB
  against 1.7 GB, decoding 1.5x the frames).

Both share the process-wide frame cache, so the extra decodes are frames several decoders missed
at the same moment. Reported: peak RSS, readers opened, frames decoded, wall time.

    python bench/bench_reader_share.py [--episodes 128] [--threads 16] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def make_video(path: Path, seconds: float, fps: int = 25, width: int = 480, height: int = 270) -> Path:
    """A moving gradient with noise: decodes like real footage (every frame differs)."""
    import av
    import numpy as np

    rng = np.random.default_rng(0)
    noise = rng.integers(0, 40, (height, width, 3), dtype=np.uint8)
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :, None]
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        s.options = {"g": str(fps * 2), "crf": "23", "preset": "ultrafast"}
        for i in range(int(seconds * fps)):
            img = ((x + 4 * i) % 256).astype(np.uint8).repeat(height, 0).repeat(3, 2) // 2 + noise
            for pk in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(pk)
        for pk in s.encode():
            c.mux(pk)
    return path


def child(variant: str, video: str, seconds: float, episodes: int, threads: int) -> dict:
    import numpy as np

    from videoseek.envs import env as env_mod
    from videoseek.envs import video as video_mod
    from videoseek.envs.actions import CropVideo
    from videoseek.envs.env import EnvConfig, VideoSeekEnv
    from videoseek.envs.sample import VideoSample

    if variant == "per-episode":
        env_mod.open_video = lambda path, backend=video_mod.DEFAULT_BACKEND: video_mod.VideoReader(path, backend=backend)
    sample = VideoSample(id="b", video=video, question="q", answer="1", problem_type="numerical", clue_intervals=[(1.0, 2.0)])
    config = EnvConfig(max_pixels=224 * 224)
    live: list = []  # every env stays alive to the end, as a batch of live episodes does
    live_lock = threading.Lock()
    queue = list(range(episodes))
    queue_lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def worker() -> None:
        barrier.wait()
        while True:
            with queue_lock:
                if not queue:
                    return
                k = queue.pop()
            rng = np.random.default_rng(k)
            env = VideoSeekEnv(sample, config)
            env.reset(seed=k)
            for _ in range(3):
                s = float(rng.uniform(0, seconds - 3))
                env.step(CropVideo(s, s + float(rng.uniform(1, 3))))
            with live_lock:
                live.append(env)

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - t0
    assert len(live) == episodes
    return {
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
        "opens": video_mod.STATS["opens"],
        "decoded": video_mod.STATS["decoded_frames"],
        "wall_s": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=128)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of the benchmark video")
    ap.add_argument("--child", choices=["shared", "per-episode"], help=argparse.SUPPRESS)
    ap.add_argument("--video", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.video, args.seconds, args.episodes, args.threads)))
        return
    video = make_video(Path(tempfile.mkdtemp(prefix="videoseek-bench-")) / "one.mp4", args.seconds)
    results = {}
    for variant in ("shared", "per-episode"):
        cmd = [sys.executable, __file__, "--child", variant, "--video", str(video), "--seconds", str(args.seconds),
               "--episodes", str(args.episodes), "--threads", str(args.threads)]  # fmt: skip
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        results[variant] = r = json.loads(out.strip().splitlines()[-1])
        label = "shared reader" if variant == "shared" else "reader per episode"
        print(f"[{label}] {args.episodes} episodes on {args.threads} threads, one {args.seconds:g} s video: peak RSS "
              f"{r['peak_rss_mb']:.0f} MB, readers opened {r['opens']}, frames decoded {r['decoded']}, wall {r['wall_s']:.2f}s")  # fmt: skip
    a, b = results["per-episode"], results["shared"]
    print(f"reader per episode / shared reader: peak RSS {a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x, "
          f"frames decoded {a['decoded'] / max(b['decoded'], 1):.2f}x, wall {a['wall_s'] / b['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
