"""Test videos whose pixels encode the frame index, so every returned frame can be checked.

Frame i shows the bits of i as `BITS` vertical black/white stripes; H.264 at a low CRF keeps
them far from the threshold, and resizing keeps stripes proportional.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

BITS = 12


def index_frame(i: int, width: int, height: int) -> np.ndarray:
    img = np.zeros((height, width, 3), np.uint8)
    edges = np.linspace(0, width, BITS + 1).astype(int)
    for b in range(BITS):
        if (i >> b) & 1:
            img[:, edges[b] : edges[b + 1]] = 255
    return img


def read_index(frame: np.ndarray) -> int:
    """Decode the frame index from a (possibly resized) index frame."""
    h, w = frame.shape[:2]
    edges = np.linspace(0, w, BITS + 1)
    value = 0
    for b in range(BITS):
        lo, hi = int(edges[b] + (edges[b + 1] - edges[b]) * 0.3), int(edges[b] + (edges[b + 1] - edges[b]) * 0.7)
        # The middle rows only: the timestamp overlay sits in the top-left corner.
        if frame[h // 2 :, lo : max(hi, lo + 1)].mean() > 127:
            value |= 1 << b
    return value


def write_index_video(path: str | Path, num_frames: int = 100, fps: float = 10, width: int = 192, height: int = 96, gop: int = 10,
                      bframes: int = 0) -> Path:
    """An index video in H.264. `bframes=0`: x264 `ultrafast` (no B-frames, decode order = display
    order). `bframes>0`: x264 `medium` with that many B-frames between references, so packets arrive
    out of display order and a decoder must reorder them (most real videos; LVBench's included)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=int(fps) if float(fps).is_integer() else fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        if bframes:
            stream.options = {"g": str(gop), "crf": "12", "preset": "medium", "bf": str(bframes), "b-pyramid": "normal"}
        else:
            stream.options = {"g": str(gop), "crf": "12", "preset": "ultrafast"}
        for i in range(num_frames):
            frame = av.VideoFrame.from_ndarray(index_frame(i, width, height), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def has_bframes(path: str | Path) -> bool:
    """True when the file's packets are not in display order (B-frames present)."""
    with av.open(str(path)) as c:
        pts = [p.pts for p in c.demux(c.streams.video[0]) if p.pts is not None]
    return pts != sorted(pts)
