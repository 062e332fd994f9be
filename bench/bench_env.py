"""Benchmark: the env's cost on top of raw decoding, and the cost of a group of G episodes.

Prints ratios measured side by side in one run (not a test; targets from DESIGN.md):
1. crop_video through `VideoSeekEnv` vs decord `get_batch` of the same frames of the same file
   (both cold: fresh reader, empty frame cache). Target: env overhead <= 1.0x the raw decode.
2. G = 8 oracle episodes of one sample vs one episode (cold cache each time; the group shares
   decoded frames through the cache). Target: <= 1.5x.
3. The three reader backends (decord, PyAV, torchcodec) side by side on the same clips of real
   H.264 with B-frames (bench_videos.py): 16 sparse initial frames, a crop window (8 frames in 5 s)
   and a long seek (8 frames of the last 5 s), each decoded by a fresh reader straight to the
   served 392x392 budget; 720p 60 s and 1080p 10 min. The default backend is chosen from this table
   (docs/data.md, "Video backends").
4. A zoom(time, box) call through `VideoSeekEnv.step` (parse, schema check, native decode through the
   frame cache, cut, resize, evidence, trajectory record) vs PyAV decoding that frame at native
   resolution on an open container (seek + decode + RGB), the same frame of the same file: CPU time
   (`time.process_time`), median over repeats, the frame cache cleared before each. On 1280x720
   small_text videos (the task zoom exists for), zooming on the sign (no resize) and on a large box
   (resized to the pixel budget). Target: <= 1.2x. For the large box a second ratio compares with
   the raw decode plus the same cut and PIL resize, the resize being part of what zoom returns.

    python bench/bench_env.py [--repeats 5] [--zoom-only]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import av
import decord
import numpy as np
from PIL import Image

from videoseek.agents.policy import PolicyOutput
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import OraclePolicy
from videoseek.envs import video as video_mod
from videoseek.envs.actions import CropVideo
from videoseek.envs.tools import get_tool
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.synth import generate_dataset

sys.path.insert(0, str(Path(__file__).parent))
from bench_videos import encoded_minute, repeat_video  # noqa: E402


def cold() -> None:
    video_mod.FRAME_CACHE.clear()
    video_mod._READERS.clear()


def time_pair(fn_a, fn_b, repeats: int) -> tuple[float, float]:
    """Median cold times of two paths, run alternately (a, b, b, a, ...) so that machine load and
    the OS file cache weigh on both alike."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for r in range(repeats):
        for which in ((0, 1) if r % 2 == 0 else (1, 0)):
            cold()
            t0 = time.perf_counter()
            (fn_a, fn_b)[which]()
            times[which].append(time.perf_counter() - t0)
    return statistics.median(times[0]), statistics.median(times[1])


def backend_table(videos: Path, repeats: int) -> None:
    """Wall-clock ms of each backend on the same clips (fresh reader each time: opening included),
    backends alternated in every repeat, median."""
    videos.mkdir(parents=True, exist_ok=True)
    files = {
        "720p 60 s": encoded_minute(videos / "720p_60s.mp4", 1280, 720, 30),
        "1080p 10 min": repeat_video(encoded_minute(videos / "1080p_1min_10fps.mp4", 1920, 1080, 10), videos / "1080p_10min.mp4", 10),
    }
    backends = [b for b in video_mod.BACKENDS if video_mod.backend_missing(b) is None]
    skipped = [b for b in video_mod.BACKENDS if b not in backends]
    print("[backends] ms per clip, decoded to 392x392 by a fresh reader (open + decode), median of", repeats,
          f"(not installed: {', '.join(skipped)})" if skipped else "")  # fmt: skip
    print(f"[backends] {'video':14s} {'clip':18s} " + " ".join(f"{b:>11s}" for b in backends))
    for name, path in files.items():
        ref = video_mod._SOURCES["pyav"](str(path))
        n, dur = len(ref.pts), float(ref.frame_end)
        size = video_mod.fit_pixels(ref.width, ref.height, 392 * 392)
        at = lambda ts: [int(i) for i in np.clip(np.searchsorted(ref.pts, np.asarray(ts) + 1e-6, side="right") - 1, 0, n - 1)]  # noqa: E731
        clips = {
            "16 sparse frames": at((np.arange(16) + 0.5) * dur / 16),
            "crop 8 in 5 s": at(dur * 0.4 + (np.arange(8) + 0.5) * 5 / 8),
            "seek: last 5 s": at(dur - 5 + (np.arange(8) + 0.5) * 5 / 8),
        }
        for b in backends:  # imports and the OS file cache, warmed alike
            video_mod._SOURCES[b](str(path)).decode(clips["16 sparse frames"][:1], size)
        for clip, idx in clips.items():
            times: dict[str, list[float]] = {b: [] for b in backends}
            for r in range(repeats):
                for b in backends if r % 2 == 0 else backends[::-1]:
                    t0 = time.perf_counter()
                    video_mod._SOURCES[b](str(path)).decode(idx, size)
                    times[b].append(time.perf_counter() - t0)
            row = {b: statistics.median(t) * 1000 for b, t in times.items()}
            best = min(row, key=row.get)
            print(f"[backends] {name:14s} {clip:18s} " + " ".join(f"{row[b]:>10.0f}{'*' if b == best else ' '}" for b in backends))


def zoom_vs_native(out: Path, n: int, repeats: int) -> float:
    """CPU ms of a zoom call through the env vs a raw native decode of the same frame; returns the ratio."""
    samples = generate_dataset(out, n=n, seed=0, kinds=["small_text"])
    zoom = get_tool("zoom")
    rows = []
    for box_name in ("sign", "large box"):
        ms: dict[str, list[float]] = {"env": [], "raw": [], "raw+resize": []}
        for sample in samples:
            kf = sample.key_frames[0]
            box = kf.boxes["sign"] if box_name == "sign" else [0.1, 0.1, 0.9, 0.9]
            call = zoom.call_text({"time": kf.time, "box": box})
            container = av.open(sample.video)
            stream = container.streams.video[0]
            pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None)
            target = pts[int(video_mod.open_video(sample.video).indices_at([kf.time])[0])]

            def raw() -> np.ndarray:
                container.seek(target, stream=stream, backward=True, any_frame=False)
                for frame in container.decode(stream):
                    if frame.pts is not None and frame.pts >= target:
                        return frame.to_ndarray(format="rgb24")
                raise RuntimeError("frame not decoded")

            def raw_resize() -> None:
                native = raw()
                h, w = native.shape[:2]
                left, top, right, bottom = (int(round(v * side)) for v, side in zip(box, (w, h, w, h)))
                size = video_mod.fit_region(right - left, bottom - top, EnvConfig().max_pixels)
                crop = native[top:bottom, left:right]
                if (crop.shape[1], crop.shape[0]) != size:
                    Image.fromarray(crop).resize(size, Image.BILINEAR)

            for r in range(repeats):
                env = VideoSeekEnv(sample, EnvConfig(tools=["crop_video", "zoom"]))
                env.reset(seed=0)  # the episode is under way: its reader is open, its initial frames decoded
                for which in (("env", "raw", "raw+resize") if r % 2 == 0 else ("raw+resize", "raw", "env")):
                    video_mod.FRAME_CACHE.clear()
                    t0 = time.process_time()
                    if which == "env":
                        _, _, _, _, info = env.step(call)
                        assert info["error"] is None, info["error"]
                    else:
                        (raw if which == "raw" else raw_resize)()
                    ms[which].append((time.process_time() - t0) * 1000)
            container.close()
        rows.append((box_name, {k: statistics.median(v) for k, v in ms.items()}))
    worst = 0.0
    for box_name, med in rows:
        ratio = med["env"] / med["raw"]
        worst = max(worst, ratio)
        print(f"[zoom] {box_name:9s}: raw PyAV native decode {med['raw']:.2f} ms CPU, env zoom call {med['env']:.2f} ms CPU -> {ratio:.2f}x "
              f"(target <= 1.20x) -> {'OK' if ratio <= 1.2 else 'MISSED'}  [{len(samples)} 1280x720 videos x {repeats} repeats]")
        if med["raw+resize"] > med["raw"] * 1.05:  # the call returned a resized region
            print(f"[zoom] {box_name:9s}: raw decode + the same cut and PIL resize {med['raw+resize']:.2f} ms CPU "
                  f"-> env {med['env'] / med['raw+resize']:.2f}x of it")
    return worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=10, help="synthetic samples to benchmark over")
    ap.add_argument("--videos", default=str(Path(tempfile.gettempdir()) / "videoseek-bench-videos"))
    ap.add_argument("--backends-only", action="store_true", help="print the backend table only")
    ap.add_argument("--zoom-only", action="store_true", help="print the zoom measurement only")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="videoseek-bench-"))
    if args.zoom_only:
        zoom_vs_native(tmp / "zoom", 4, max(args.repeats, 10))
        return
    backend_table(Path(args.videos), args.repeats)
    if args.backends_only:
        return
    samples = generate_dataset(tmp, n=args.n, seed=0)
    config = EnvConfig(max_pixels=1024 * 1024)  # same pixels as the raw decode: no resize on either side

    def plan(sample):
        s, e = sample.clue_intervals[0]
        return s, e

    # The exact frame indices the env will decode: initial frames + one crop of the first clue.
    def env_path():
        for sample in samples:
            env = VideoSeekEnv(sample, config)
            env.reset(seed=0)
            env.step(CropVideo(*plan(sample)))

    def raw_path():
        for sample in samples:
            vr = decord.VideoReader(sample.video, ctx=decord.cpu(0), num_threads=1)
            n, d = len(vr), sample.duration
            fps = vr.get_avg_fps()
            init = np.minimum(((np.arange(8) + 0.5) * d / 8 * fps).astype(int), n - 1)
            s, e = plan(sample)
            crop = np.unique(np.minimum(((s + (np.arange(8) + 0.5) * (e - s) / 8) * fps).astype(int), n - 1))
            vr.get_batch(list(init)).asnumpy()
            vr.get_batch(list(crop)).asnumpy()

    raw, env = time_pair(raw_path, env_path, args.repeats)
    overhead = (env - raw) / raw
    print(f"[crop_video] raw decord get_batch: {raw * 1000:.1f} ms, env reset+crop: {env * 1000:.1f} ms over {len(samples)} samples")
    print(f"[crop_video] env overhead on top of raw decode: {overhead:.2f}x (target <= 1.00x) -> {'OK' if overhead <= 1.0 else 'MISSED'}")

    # The oracle's crops with a blind answer: the policy costs nothing, so this times the env and
    # the runner (decode, parsing, evidence, rewards, trajectory records), which is what G shares.
    class ReplayOracle(OraclePolicy):
        def turn(self, inp):
            if sum(m.role == "tool" for m in inp.messages) >= len(inp.sample.clue_intervals):
                return PolicyOutput("<think>done</think><answer>A</answer>")
            return super().turn(inp)

    oracle = ReplayOracle()
    cfg = EnvConfig()

    def group(g):
        return lambda: run_rollouts(samples, oracle, group_size=g, env_config=cfg, progress=False)

    one, eight = time_pair(group(1), group(8), args.repeats)
    ratio = eight / one
    print(f"[group] 1 episode/sample: {one * 1000:.1f} ms, 8 episodes/sample: {eight * 1000:.1f} ms")
    print(f"[group] G=8 vs one episode: {ratio:.2f}x (target <= 1.50x) -> {'OK' if ratio <= 1.5 else 'MISSED'}")
    zoom_vs_native(tmp / "zoom", 4, max(args.repeats, 10))


if __name__ == "__main__":
    main()
