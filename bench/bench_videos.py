"""Benchmark videos, made cheaply: real H.264 (B-frames, keyframes at a set spacing) at 720p/1080p.

`encoded_minute` encodes a short clip once (moving noise, so the encoder does real work and the
decoder decodes real residuals); `repeat_video` remuxes it N times with shifted timestamps (no
re-encode), which turns one encoded minute into a 10- or 60-minute file in seconds.
Not a test helper (tests/videos.py holds the index videos tests read frame numbers from).
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


def encoded_minute(path: str | Path, width: int, height: int, fps: int, seconds: float = 60.0, keyframe_s: float = 10.0,
                   bframes: int = 3) -> Path:  # fmt: skip
    """An H.264 clip with B-frames and a keyframe every `keyframe_s` seconds (x264 veryfast)."""
    path = Path(path)
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, size=(height // 8, width // 8, 3), dtype=np.uint8).repeat(8, 0).repeat(8, 1)
    tmp = path.with_suffix(".part.mp4")
    with av.open(str(tmp), "w") as c:
        s = c.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = width, height, "yuv420p"
        gop = int(round(keyframe_s * fps))
        s.options = {"g": str(gop), "keyint_min": str(gop), "sc_threshold": "0", "bf": str(bframes), "preset": "veryfast", "crf": "28"}
        for i in range(int(seconds * fps)):
            img = np.roll(base, (i * 3, i * 5), axis=(0, 1))  # a moving scene: motion vectors and residuals
            for packet in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(packet)
        for packet in s.encode():
            c.mux(packet)
    tmp.rename(path)
    return path


def repeat_video(src: str | Path, dst: str | Path, times: int) -> Path:
    """`src` played `times` times in a row, as one file: packets copied, timestamps shifted."""
    dst = Path(dst)
    if dst.exists():
        return dst
    tmp = dst.with_suffix(".part.mp4")
    with av.open(str(src)) as inp:
        ins = inp.streams.video[0]
        packets = [p for p in inp.demux(ins) if p.dts is not None]
        span = max(p.pts for p in packets) - min(p.pts for p in packets) + (packets[1].duration or 1)
        with av.open(str(tmp), "w") as out:
            outs = out.add_stream_from_template(ins)
            for k in range(times):
                for p in packets:
                    p.pts, p.dts = p.pts + (span if k else 0), p.dts + (span if k else 0)
                    p.stream = outs
                    out.mux(p)
    tmp.rename(dst)
    return dst
