"""Video access: decord (default) or PyAV, exact frame timestamps, a pixel budget, a shared frame cache.

`VideoReader.frames_at(times)` maps each requested time to the nearest decoded frame and returns
the frames with their *presentation* timestamps, so a frame is always labelled with the moment
it shows. Frames pass through `FRAME_CACHE`, a process-wide LRU bounded in bytes and safe across
threads: the G rollouts of one sample (and every env on the same file) decode each frame once.
Cached arrays are read-only, so no caller can change what another one sees.

Errors are `DataError`s naming the path: a missing file, a file no decoder opens, a video with no
frames. Decoder exceptions never escape raw.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from videoseek.envs.sample import DataError

BACKENDS = ("decord", "pyav")


@dataclass(frozen=True)
class VideoInfo:
    path: str
    num_frames: int
    fps: float
    duration: float  # seconds: end of the last frame
    width: int
    height: int


# ---- frame cache ------------------------------------------------------------------------------
class FrameCache:
    """Thread-safe LRU of decoded (and resized) frames, bounded by total bytes.

    Keys are (file identity, frame index, output size, overlay); values are read-only arrays.
    """

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = int(max_bytes)
        self._data: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple) -> np.ndarray | None:
        with self._lock:
            arr = self._data.get(key)
            if arr is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return arr

    def put(self, key: tuple, arr: np.ndarray) -> np.ndarray:
        arr = np.ascontiguousarray(arr)
        arr.setflags(write=False)
        if arr.nbytes > self.max_bytes:
            return arr
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._data[key] = arr
            self._bytes += arr.nbytes
            while self._bytes > self.max_bytes:
                _, evicted = self._data.popitem(last=False)
                self._bytes -= evicted.nbytes
        return arr

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0
            self.hits = self.misses = 0


FRAME_CACHE = FrameCache(int(os.environ.get("VIDEOSEEK_FRAME_CACHE_MB", "512")) * 2**20)


# ---- decoding backends ------------------------------------------------------------------------
class _DecordSource:
    def __init__(self, path: str) -> None:
        import decord

        decord.bridge.set_bridge("native")
        self._vr = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        n = len(self._vr)
        if n == 0:
            raise DataError(f"{path}: video has no frames")
        # Presentation start times of every frame (seconds): exact, not index / fps.
        self.pts = np.asarray(self._vr.get_frame_timestamp(np.arange(n))[:, 0], dtype=np.float64)
        self.frame_end = float(self._vr.get_frame_timestamp([n - 1])[0, 1])
        self.fps = float(self._vr.get_avg_fps())
        # decord has no size query and decoding a frame for it costs a seek; the container header has it.
        import av

        with av.open(path) as c:
            cc = c.streams.video[0].codec_context
            self.width, self.height = int(cc.width), int(cc.height)

    def decode(self, indices: Sequence[int]) -> np.ndarray:
        frames = self._vr.get_batch(list(indices)).asnumpy()
        # After a batch, decord's threaded decoder busy-waits until it is reset: each idle open
        # reader burned about 0.08-0.15 of a core here, and a pool of them slowed every decode
        # 2-3x. Seeking back to the first keyframe parks it (measured: idle CPU 0).
        self._vr.seek(0)
        return frames


class _PyAVSource:
    """PyAV fallback: timestamps from the demuxed packets (no decode), frames by seek + decode."""

    def __init__(self, path: str) -> None:
        import av

        self._path = path
        with av.open(path) as c:
            stream = c.streams.video[0]
            tb = float(stream.time_base)
            pts = sorted(p.pts for p in c.demux(stream) if p.pts is not None)
            self.width, self.height = stream.codec_context.width, stream.codec_context.height
            rate = stream.average_rate or stream.guessed_rate
        if not pts:
            raise DataError(f"{path}: video has no frames")
        start = pts[0]
        self.pts = np.asarray([(p - start) * tb for p in pts], dtype=np.float64)
        self.fps = float(rate) if rate else (len(pts) - 1) / max(self.pts[-1], 1e-9)
        self.frame_end = float(self.pts[-1] + 1.0 / self.fps)
        self._tb, self._start = tb, start

    def decode(self, indices: Sequence[int]) -> np.ndarray:
        import av

        wanted = {int(self._start + round(self.pts[i] / self._tb)): i for i in indices}
        out: dict[int, np.ndarray] = {}
        with av.open(self._path) as c:
            stream = c.streams.video[0]
            for target in sorted(wanted):
                if wanted[target] in out:
                    continue
                c.seek(target, stream=stream, backward=True, any_frame=False)
                for frame in c.decode(stream):
                    if frame.pts is None or frame.pts < target:
                        continue
                    out[wanted[target]] = frame.to_ndarray(format="rgb24")
                    break
        missing = [i for i in indices if i not in out]
        if missing:
            raise DataError(f"{self._path}: could not decode frames {missing[:5]}")
        return np.stack([out[i] for i in indices])


def _open_source(path: str, backend: str):
    if backend not in BACKENDS:
        raise ValueError(f"unknown video backend {backend!r}; choose one of {BACKENDS}")
    if not os.path.isfile(path):
        raise DataError(f"{path}: video file not found")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: video file is empty")
    try:
        return _DecordSource(path) if backend == "decord" else _PyAVSource(path)
    except DataError:
        raise
    except ImportError as exc:
        raise DataError(f"video backend {backend!r} is not installed ({exc})") from None
    except Exception as exc:  # decoders raise many types; the user needs the path and the gist
        msg = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: cannot decode video with {backend} ({msg})") from None


# ---- resizing and overlay ---------------------------------------------------------------------
def fit_pixels(width: int, height: int, max_pixels: int | None) -> tuple[int, int]:
    """Output size keeping the aspect ratio with width*height <= max_pixels (never upscales).

    >>> fit_pixels(320, 240, 19200)
    (160, 120)
    """
    if not max_pixels or width * height <= max_pixels:
        return width, height
    scale = (max_pixels / (width * height)) ** 0.5
    return max(1, int(width * scale)), max(1, int(height * scale))


def format_clock(t: float) -> str:
    """HH:MM:SS as VideoMend overlays it.

    >>> format_clock(3725.4)
    '01:02:05'
    """
    t = max(0, int(t))
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"


@lru_cache(maxsize=1)
def _font() -> ImageFont.ImageFont:
    return ImageFont.load_default()


def overlay_timestamp(frame: np.ndarray, t: float) -> np.ndarray:
    """Burn HH:MM:SS into the top-left corner (white on a black box)."""
    img = Image.fromarray(frame)
    draw = ImageDraw.Draw(img)
    text = format_clock(t)
    x0, y0, x1, y1 = draw.textbbox((2, 2), text, font=_font())
    draw.rectangle((0, 0, x1 + 2, y1 + 2), fill=(0, 0, 0))
    draw.text((2, 2), text, fill=(255, 255, 255), font=_font())
    return np.asarray(img)


# ---- the reader -------------------------------------------------------------------------------
class VideoReader:
    """Random access to one video's frames by time.

    Arguments:
        path: video file.
        backend: "decord" (default, fast random access) or "pyav" (fallback, bundles FFmpeg).
        cache: the frame cache; the process-wide `FRAME_CACHE` by default.
    """

    def __init__(self, path: str | os.PathLike[str], backend: str = "decord", cache: FrameCache | None = None) -> None:
        self.path = str(Path(path).resolve())
        self.backend = backend
        self.cache = FRAME_CACHE if cache is None else cache
        self._src = _open_source(self.path, backend)
        st = os.stat(self.path)
        self._file_key = (self.path, st.st_size, st.st_mtime_ns)
        self._lock = threading.Lock()  # decoders are not thread-safe

    @property
    def info(self) -> VideoInfo:
        s = self._src
        return VideoInfo(self.path, len(s.pts), s.fps, self.duration, s.width, s.height)

    @property
    def num_frames(self) -> int:
        return len(self._src.pts)

    @property
    def fps(self) -> float:
        return self._src.fps

    @property
    def duration(self) -> float:
        return float(self._src.frame_end)

    @property
    def frame_times(self) -> np.ndarray:
        return self._src.pts

    def indices_at(self, times: Sequence[float]) -> np.ndarray:
        """Index of the frame shown at each time (the last frame starting at or before it)."""
        t = np.asarray(times, dtype=np.float64)
        idx = np.searchsorted(self._src.pts, t + 1e-6, side="right") - 1
        return np.clip(idx, 0, self.num_frames - 1)

    def frames_at(self, times: Sequence[float], max_pixels: int | None = None, overlay: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Frames shown at `times`: uint8 (n,H,W,3) and their presentation timestamps (n,)."""
        return self.frames_by_index(self.indices_at(times), max_pixels=max_pixels, overlay=overlay)

    def frames_by_index(self, indices: Sequence[int], max_pixels: int | None = None, overlay: bool = False) -> tuple[np.ndarray, np.ndarray]:
        indices = [int(i) for i in indices]
        size = fit_pixels(self._src.width, self._src.height, max_pixels)
        keys = [(self._file_key, i, size, overlay) for i in indices]
        got: dict[int, np.ndarray] = {}
        for i, k in zip(indices, keys):
            arr = self.cache.get(k)
            if arr is not None:
                got[i] = arr
        todo = sorted({i for i in indices if i not in got})
        if todo:
            with self._lock:
                try:
                    raw = self._src.decode(todo)
                except DataError:
                    raise
                except Exception as exc:
                    raise DataError(f"{self.path}: decoding frames failed ({type(exc).__name__}: {str(exc)[:100]})") from None
            for i, frame in zip(todo, raw):
                if (frame.shape[1], frame.shape[0]) != size:
                    frame = np.asarray(Image.fromarray(frame).resize(size, Image.BILINEAR))
                if overlay:
                    frame = overlay_timestamp(frame, self._src.pts[i])
                got[i] = self.cache.put((self._file_key, i, size, overlay), frame)
        w, h = size
        frames = np.stack([got[i] for i in indices]) if indices else np.zeros((0, h, w, 3), np.uint8)
        return frames, self._src.pts[indices].copy() if indices else np.zeros(0)


# Readers are shared per (path, backend): opening decord costs a few ms and G envs use one file.
_READERS: OrderedDict[tuple[str, str], VideoReader] = OrderedDict()
_READERS_LOCK = threading.Lock()
_MAX_OPEN_READERS = 32


def open_video(path: str | os.PathLike[str], backend: str = "decord") -> VideoReader:
    """A shared `VideoReader` for `path` (bounded pool of open files, reopened if the file changed)."""
    key = (str(Path(path).resolve()), backend)
    with _READERS_LOCK:
        reader = _READERS.get(key)
        if reader is not None:
            try:
                st = os.stat(key[0])
                fresh = reader._file_key[1:] == (st.st_size, st.st_mtime_ns)
            except OSError:
                fresh = False
            if fresh:
                _READERS.move_to_end(key)
                return reader
            del _READERS[key]
    reader = VideoReader(path, backend=backend)
    with _READERS_LOCK:
        _READERS[key] = reader
        while len(_READERS) > _MAX_OPEN_READERS:
            _READERS.popitem(last=False)
    return reader


def probe_video(path: str | os.PathLike[str], backend: str = "decord") -> VideoInfo:
    """Open a video and return its frame count, fps, duration and size (DataError if unusable)."""
    return open_video(path, backend).info
