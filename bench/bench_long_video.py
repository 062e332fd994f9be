"""Benchmark: hour-long videos (LVBench's run about an hour) through the env, side by side in one run.

A 60-minute 1080p H.264 video with B-frames and keyframes 10 s apart is made cheaply: one encoded
minute at 5 fps, remuxed 60 times with shifted timestamps (bench_videos.py). Prints:

1. raw decode of the env's frames with each backend (fresh decoder, no cache; at native size and
   straight to the served size): 16 sparse initial frames and 8 frames of the last minute; the
   fastest backend at either size is "best";
2. the env's first observation (VideoSeekEnv + reset, fresh reader, empty cache) and a crop of the
   last minute over the best raw decode of the same frames. Target: each <= 1.20x;
3. 64 concurrent episodes of 56 frames (16 + 5 crops of 8 at 392x392, all alive at once, run on
   8 threads, each keeping its observations as a driver's conversation does, in a fresh process):
   that process's RSS, for envs as the episode drivers make them (`share_frames=True`: the
   episodes share the frames they all see, read-only). Target: < 2 GB. For comparison, the same
   with a user's envs (the default: every observation its own copy, as gymnasium expects).

Wall-clock seconds, median of repeats, backends and paths alternated.

    python bench/bench_long_video.py [--repeats 3] [--backend pyav] [--memory-only]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_videos import encoded_minute, repeat_video  # noqa: E402

from videoseek.envs import video as video_mod  # noqa: E402
from videoseek.envs.actions import CropVideo  # noqa: E402
from videoseek.envs.env import EnvConfig, VideoSeekEnv  # noqa: E402
from videoseek.envs.sample import VideoSample  # noqa: E402

LAST_MINUTE = (3540.0, 3600.0)


def cold() -> None:
    video_mod.FRAME_CACHE.clear()
    video_mod._READERS.clear()


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        cold()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default=video_mod.DEFAULT_BACKEND, choices=video_mod.BACKENDS, help="the env's backend")
    ap.add_argument("--videos", default=str(Path(tempfile.gettempdir()) / "videoseek-bench-videos"))
    ap.add_argument("--rss-only", action="store_true", help=argparse.SUPPRESS)  # part 3, in its own process
    ap.add_argument("--own-frames", action="store_true", help=argparse.SUPPRESS)  # part 3 with share_frames=False
    ap.add_argument("--memory-only", action="store_true", help="run part 3 only (both settings)")
    args = ap.parse_args()
    out = Path(args.videos)
    out.mkdir(parents=True, exist_ok=True)
    path = str(repeat_video(encoded_minute(out / "1080p_1min_5fps.mp4", 1920, 1080, 5), out / "1080p_60min.mp4", 60))
    sample = VideoSample(id="hour", video=path, question="What happens?", options=["A. x", "B. y"], answer="A",
                         problem_type="multiple choice", duration=3600.0, clue_intervals=[LAST_MINUTE])  # fmt: skip
    config = EnvConfig(initial_frames=16, frames_per_call=8, max_pixels=392 * 392, video_backend=args.backend)
    if args.rss_only:
        return concurrent_episodes(sample, config, share_frames=not args.own_frames)
    if args.memory_only:
        return memory(args)

    # The exact frames the env decodes, found once.
    probe = VideoSeekEnv(sample, config)
    probe.reset(seed=0)
    probe.step(CropVideo(*LAST_MINUTE))
    reader = probe.video
    init_idx = [int(i) for i in reader.indices_at([f.t for f in probe.trajectory.initial.frames])]
    crop_idx = [int(i) for i in reader.indices_at([f.t for f in probe.trajectory.turns[0].observation.frames])]

    served = video_mod.fit_pixels(reader.info.width, reader.info.height, config.max_pixels)
    available = [b for b in video_mod.BACKENDS if video_mod.backend_missing(b) is None]
    raw: dict[str, dict[str, float]] = {b: {} for b in available}
    for b in available:  # imports and the OS file cache warmed for each
        video_mod._SOURCES[b](path).decode(init_idx[:1], (1920, 1080))
    for _ in range(args.repeats):
        for b in available:
            for what, idx in (("initial", init_idx), ("last minute", crop_idx)):
                for scaled in (False, True):  # native size (then resized), and straight to the served size
                    t0 = time.perf_counter()
                    src = video_mod._SOURCES[b](path)
                    src.decode(idx, served if scaled else (src.width, src.height))
                    raw[b].setdefault((what, scaled), []).append(time.perf_counter() - t0)
    print(f"raw decode incl. opening, median of {args.repeats}, s (native / straight to {served[0]}x{served[1]}):")
    for b in available:
        print(f"  {b:10s} " + "; ".join(f"{what} {statistics.median(raw[b][(what, False)]):.3f} / "
                                      f"{statistics.median(raw[b][(what, True)]):.3f}" for what in ("initial", "last minute")))  # fmt: skip
    # The best raw decode of each clip: the fastest backend, at whichever size is faster.
    best = {what: min(statistics.median(raw[b][(what, s)]) for b in available for s in (False, True)) for what in ("initial", "last minute")}
    best_name = {what: min(((b, s) for b in available for s in (False, True)), key=lambda k: statistics.median(raw[k[0]][(what, k[1])]))
                 for what in best}  # fmt: skip
    best_name = {what: f"{b}, {'served size' if s else 'native'}" for what, (b, s) in best_name.items()}

    def first_obs():
        VideoSeekEnv(sample, config).reset(seed=0)

    def crop():
        env = VideoSeekEnv(sample, config.model_copy(update={"initial_frames": 0}))
        env.reset(seed=0)
        env.step(CropVideo(*LAST_MINUTE))

    env_first, env_crop = median_time(first_obs, args.repeats), median_time(crop, args.repeats)
    for name, got, what in (("first observation", env_first, "initial"), ("crop of the last minute", env_crop, "last minute")):
        ratio = got / best[what]
        print(f"[{name}] env ({args.backend}) {got:.3f} s vs best raw ({best_name[what]}) {best[what]:.3f} s -> "
              f"{ratio:.2f}x (target <= 1.20x) {'OK' if ratio <= 1.2 else 'MISSED'}")  # fmt: skip

    memory(args)


def memory(args: argparse.Namespace) -> None:
    """Part 3, once per setting, each in a fresh process: this one may have imported every backend
    (torch with torchcodec) and decoded at native size, which glibc does not give back to the OS."""
    cmd = [sys.executable, __file__, "--videos", args.videos, "--backend", args.backend, "--rss-only"]
    for extra in ([], ["--own-frames"]):
        print(subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout.strip())


def concurrent_episodes(sample: VideoSample, config: EnvConfig, share_frames: bool = True) -> None:
    """64 episodes alive at once, each a reset and 5 crops of 8 frames, played on 8 threads; each
    keeps its observations' frames (a driver's conversation holds them until the group is done)."""
    before = rss_mb()
    # Every episode's own crops (distinct frame sets, so nothing is shared but the initial frames),
    # drawn inside two minutes of the video so the run decodes a few hundred frames, not 64 x 40.
    rng = np.random.default_rng(0)
    starts = rng.uniform(1800, 1890, size=(64, 5))

    def play(k):
        env = VideoSeekEnv(sample, config.model_copy(update={"max_turns": 6}), share_frames=share_frames)
        seen = [env.reset(seed=k)[0]["frames"]]
        for s in starts[k]:
            seen.append(env.step(CropVideo(float(s), float(s) + 30.0))[0]["frames"])
        return env, seen

    with ThreadPoolExecutor(8) as pool:
        played = list(pool.map(play, range(64)))
    frames = sum(sum(len(f) for f in seen) for _, seen in played)
    after = rss_mb()
    if share_frames:
        print(f"[64 episodes, share_frames=True (the episode drivers)] {frames} frames held ({frames // 64} per episode), "
              f"RSS of a fresh process {after:.0f} MB ({before:.0f} MB before the episodes; target < 2048 MB) "
              f"{'OK' if after < 2048 else 'MISSED'}")  # fmt: skip
    else:
        print(f"[64 episodes, share_frames=False (a user's env: each observation its own copy)] {frames} frames held, "
              f"RSS of a fresh process {after:.0f} MB ({before:.0f} MB before; no target)")  # fmt: skip


if __name__ == "__main__":
    main()
