"""Video access: PyAV (default), decord or torchcodec; exact frame timestamps, a pixel budget, a shared frame cache.

`VideoReader.frames_at(times)` maps each requested time to the nearest decoded frame and returns
the frames with their *presentation* timestamps, so a frame is always labelled with the moment
it shows. Frames pass through `FRAME_CACHE`, a process-wide LRU bounded in bytes and safe across
threads: the G rollouts of one sample (and every env on the same file) decode each frame once.
Cached arrays are read-only, so no caller can change what another one sees; a caller gets the
cached batch itself, so the episodes asking for the same frames share one array.

Errors are `DataError`s naming the path: a missing file, a file no decoder opens, a truncated or
corrupt video, a video with no frames. Decoder exceptions never escape raw, and the decoders' own
log lines are silenced (`VIDEOSEEK_DECODER_LOGS=1` keeps them, for debugging a decoder).

One `VideoReader` per file is shared by every env that opens it (`open_video`), so concurrent
episodes of one video hold one decoder and decode each frame once.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import sys
import threading
import warnings
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from videoseek.envs.sample import DataError

BACKENDS = ("decord", "pyav", "torchcodec")
# Chosen by bench/bench_env.py (docs/data.md, "Video backends").
DEFAULT_BACKEND = "pyav"

# Readers opened and frames decoded since import (tests and bench/bench_reader_share.py read them).
STATS: Counter = Counter()
_STATS_LOCK = threading.Lock()


def _count(key: str, n: int = 1) -> None:
    with _STATS_LOCK:
        STATS[key] += n


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

    Keys are (file identity, frame index, output size, overlay) for a frame and (file identity,
    tuple of indices, output size, overlay) for the stacked batch a caller got; values are
    read-only arrays. A batch's frames are cached as views of it, so they share its memory;
    `hits` / `misses` count frames.
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

    def count_hits(self, n: int) -> None:
        """Count `n` hits served without `get` (a shared batch of `n` cached frames)."""
        with self._lock:
            self.hits += n

    def peek(self, key: tuple) -> np.ndarray | None:
        """Like `get`, without counting a hit or a miss."""
        with self._lock:
            arr = self._data.get(key)
            if arr is not None:
                self._data.move_to_end(key)
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

    def holds(self, arr: np.ndarray) -> bool:
        """True when `arr` is one of the cached arrays (what keeps a returned batch alive)."""
        with self._lock:
            return any(v is arr for v in self._data.values())

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0
            self.hits = self.misses = 0


FRAME_CACHE = FrameCache(int(os.environ.get("VIDEOSEEK_FRAME_CACHE_MB", "512")) * 2**20)


# ---- decoder noise ----------------------------------------------------------------------------
_KEEP_DECODER_LOGS = os.environ.get("VIDEOSEEK_DECODER_LOGS", "") not in ("", "0")
_quiet_done: set[str] = set()


def _quiet_decoder_logs(backend: str) -> None:
    """Turn off the FFmpeg log lines each backend's bundled libav prints on a bad file or packet
    ("[h264 @ 0x...] Invalid NAL unit size", "moov atom not found"): the DataError says it once."""
    if _KEEP_DECODER_LOGS or backend in _quiet_done:
        return
    _quiet_done.add(backend)
    if backend == "decord":
        import decord

        decord.logging.set_level(decord.logging.QUIET)
    import av.logging  # PyAV >= 13 ignores FFmpeg's logs by default; older releases forward them

    try:
        av.logging.set_level(None)
    except (TypeError, ValueError):  # pragma: no cover - PyAV 12
        av.logging.set_level(av.logging.PANIC)


_fd2_lock = threading.Lock()
_fd2_users = 0
_fd2_saved: int | None = None


@contextlib.contextmanager
def quiet_stderr():
    """Point fd 2 at /dev/null for the duration: decord's C++ code prints its own "ERROR opening"
    lines there, which no log level reaches. Counted, so overlapping users in threads restore the
    real stderr only when the last one leaves. Keep the window short: every thread's stderr is
    muted while it is open (only decord's open is wrapped, a few ms)."""
    global _fd2_users, _fd2_saved
    if _KEEP_DECODER_LOGS:
        yield
        return
    with _fd2_lock:
        if _fd2_users == 0:
            try:
                sys.stderr.flush()
                saved = os.dup(2)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 2)
                os.close(devnull)
                _fd2_saved = saved
            except OSError:  # no fd 2 (embedded interpreters): nothing to silence
                _fd2_saved = None
        _fd2_users += 1
    try:
        yield
    finally:
        with _fd2_lock:
            _fd2_users -= 1
            if _fd2_users == 0 and _fd2_saved is not None:
                os.dup2(_fd2_saved, 2)
                os.close(_fd2_saved)
                _fd2_saved = None


# ---- truncated files ----------------------------------------------------------------------------
_MP4_BOXES = {b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"uuid", b"meta", b"moof", b"mfra", b"styp", b"sidx", b"pdin"}


def mp4_truncation(path: str) -> str | None:
    """Why an MP4/MOV file is cut short, or None: the top-level boxes (size + type headers, a few
    reads) must tile the file, and a file cut mid-'mdat' or before its 'moov' index is truncated.
    Decoders report these cryptically ("av_read_frame failed with 1094995529", "moov atom not
    found") or only when a missing frame is requested; files that are not MP4 pass through."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8 or head[4:8] not in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip"):
                return None  # not ISO-BMFF: leave it to the decoders
            pos, seen = 0, set()
            while pos < size:
                fh.seek(pos)
                hdr = fh.read(16)
                if len(hdr) < 8:
                    return f"the file ends inside a box header at byte {pos}"
                box_size, box_type = struct.unpack(">I4s", hdr[:8])
                if box_size == 1:
                    if len(hdr) < 16:
                        return f"the file ends inside a box header at byte {pos}"
                    box_size = struct.unpack(">Q", hdr[8:16])[0]
                elif box_size == 0:  # extends to the end of the file
                    box_size = size - pos
                if box_type not in _MP4_BOXES and not box_type.isalnum():
                    return None  # unknown layout: do not guess
                if box_size < 8:
                    return f"box {box_type.decode('latin-1')!r} at byte {pos} has an invalid size {box_size}"
                if pos + box_size > size:
                    return (f"the file ends inside its {box_type.decode('latin-1')!r} box "
                            f"({size - pos} of {box_size} bytes)")  # fmt: skip
                seen.add(box_type)
                pos += box_size
            if b"moov" not in seen and b"moof" not in seen:
                return "it has no 'moov' index (the file was cut before the index was written)"
    except OSError:
        return None
    return None


def _decoder_gist(exc: BaseException) -> str:
    """A decoder exception's message, short: PyAV's FFmpeg error text, or decord's without its
    "[hh:mm:ss] /path/file.cc:123:" prefixes and "Check failed: ..." internals."""
    strerror = getattr(exc, "strerror", None)
    if isinstance(strerror, str) and strerror:
        return strerror  # PyAV: "Invalid data found when processing input"
    text = re.sub(r"\[\d\d:\d\d:\d\d\]\s*\S+?:\d+:\s*", "", str(exc)).strip()
    text = text.splitlines()[0] if text else ""
    text = text.rsplit("Thread worker: ", 1)[-1]  # decord: "Check failed: avcodec_...() Thread worker: Error sending packet."
    return (text if len(text) <= 100 else text[:97] + "...") or type(exc).__name__


# ---- decoding backends ------------------------------------------------------------------------
# Every backend decodes straight to the size the env serves (`decode(indices, size)`): FFmpeg's
# swscale converts to RGB and scales in one pass, instead of an RGB frame at native size that PIL
# then resizes (a 1080p frame is 6.2 MB; 392x220 is 0.26 MB). swscale's bilinear filter is not
# PIL's, so pixels differ slightly from a PIL resize (and between backends: decord scales with
# FFmpeg's default bicubic filter).


@dataclass(frozen=True)
class _StreamIndex:
    """A video stream's exact frame timeline, read from the demuxed packets (no decode)."""

    pts: np.ndarray  # presentation start of every frame, seconds from the first frame, sorted
    keyframe: np.ndarray  # bool per frame: a seek can start decoding there
    fps: float
    frame_end: float
    width: int
    height: int
    time_base: float
    start: int  # the first frame's pts in stream time-base units

    def stream_pts(self, index: int) -> int:
        """Frame `index`'s pts in stream units (what the decoders report)."""
        return int(self.start + round(self.pts[index] / self.time_base))


def _stream_index(path: str) -> _StreamIndex:
    """Demux every packet's pts (PyAV): exact times, B-frame reordering included, without decoding.

    A demux reads the file once (packets only); for a 60-minute 1080p file that is the price of
    exact timestamps, and torchcodec's exact mode or decord's index pay it too."""
    import av

    with av.open(path) as c:
        if not c.streams.video:
            raise DataError(f"{path}: no video stream")
        stream = c.streams.video[0]
        tb = float(stream.time_base)
        num, den = stream.time_base.numerator, stream.time_base.denominator
        packets = sorted((p.pts, bool(p.is_keyframe)) for p in c.demux(stream) if p.pts is not None)
        width, height = stream.codec_context.width, stream.codec_context.height
        rate = stream.average_rate or stream.guessed_rate
    if not packets:
        raise DataError(f"{path}: video has no frames")
    start = packets[0][0]
    # (pts - start) * num / den: an exact integer product, then one correctly rounded division, so
    # a frame at 12.2 s is 12.2, not 12.200000000000001 (prompts print and processors round these).
    pts = np.asarray([p - start for p, _ in packets], dtype=np.int64) * num / den
    fps = float(rate) if rate else (len(pts) - 1) / max(pts[-1], 1e-9)
    keyframe = np.asarray([k for _, k in packets], dtype=bool)
    return _StreamIndex(pts, keyframe, fps, float(pts[-1] + 1.0 / fps), int(width), int(height), tb, start)


class _DecordSource:
    """decord: its own frame index; one decoder per output size (decord scales at construction)."""

    def __init__(self, path: str) -> None:
        import av
        import decord

        self._path = path
        # The container header first: PyAV's error on a non-video says why ("Invalid data found
        # when processing input"); decord's says "Error reading PATH..." and prints the cause.
        with av.open(path) as c:
            if not c.streams.video:
                raise DataError(f"{path}: no video stream")
            cc = c.streams.video[0].codec_context
            # decord has no size query and decoding a frame for it costs a seek; the header has it.
            self.width, self.height = int(cc.width), int(cc.height)
        decord.bridge.set_bridge("native")
        self._readers: dict[tuple[int, int], Any] = {}
        vr = self._reader((self.width, self.height))
        n = len(vr)
        if n == 0:
            raise DataError(f"{path}: video has no frames")
        # Presentation start times of every frame (seconds): exact, not index / fps.
        self.pts = np.asarray(vr.get_frame_timestamp(np.arange(n))[:, 0], dtype=np.float64)
        self.frame_end = float(vr.get_frame_timestamp([n - 1])[0, 1])
        self.fps = float(vr.get_avg_fps())

    def _reader(self, size: tuple[int, int]) -> Any:
        vr = self._readers.get(size)
        if vr is None:
            import decord

            native = size == (self.width, self.height)
            kwargs = {} if native else {"width": size[0], "height": size[1]}
            with quiet_stderr():
                vr = self._readers[size] = decord.VideoReader(self._path, ctx=decord.cpu(0), num_threads=1, **kwargs)
        return vr

    def decode(self, indices: Sequence[int], size: tuple[int, int]) -> np.ndarray:
        vr = self._reader(size)
        frames = vr.get_batch(list(indices)).asnumpy()
        # After a batch, decord's threaded decoder busy-waits until it is reset: each idle open
        # reader burned about 0.08-0.15 of a core here, and a pool of them slowed every decode
        # 2-3x. Seeking back to the first keyframe parks it (measured: idle CPU 0).
        vr.seek(0)
        return frames


class _PyAVSource:
    """PyAV: timestamps from the demuxed packets, frames by seek + decode, one open container.

    Hand-written over PyAV (no library wraps it): frames are decoded in time order and a seek
    happens only when the next wanted frame lies past a keyframe beyond the current position, so
    a crop window inside one GOP costs one seek, not one per frame."""

    def __init__(self, path: str) -> None:
        import av

        self._path = path
        self.index = _stream_index(path)
        self.pts, self.fps, self.frame_end = self.index.pts, self.index.fps, self.index.frame_end
        self.width, self.height = self.index.width, self.index.height
        self._container = av.open(path)
        self._stream = self._container.streams.video[0]
        self._last_pts: int | None = None  # pts of the last frame decoded, None after a seek

    def decode(self, indices: Sequence[int], size: tuple[int, int]) -> np.ndarray:
        ix = self.index
        wanted = {ix.stream_pts(i): i for i in indices}
        out: dict[int, np.ndarray] = {}
        native = size == (self.width, self.height)
        frames = None
        for target in sorted(wanted):
            i = wanted[target]
            key = int(np.flatnonzero(ix.keyframe[: i + 1])[-1]) if ix.keyframe[: i + 1].any() else 0
            if frames is None or self._last_pts is None or self._last_pts >= target or ix.stream_pts(key) > self._last_pts:
                self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
                frames, self._last_pts = self._container.decode(self._stream), None
            for frame in frames:
                if frame.pts is None:
                    continue
                self._last_pts = frame.pts
                if frame.pts >= target:
                    out[i] = frame.to_ndarray(format="rgb24") if native else frame.to_ndarray(
                        format="rgb24", width=size[0], height=size[1], interpolation="BILINEAR")  # fmt: skip
                    break
        self._last_pts = None  # the decoder's state is not kept across calls (another size may follow)
        missing = [i for i in indices if i not in out]
        if missing:
            raise DataError(f"{self._path}: could not decode frames {missing[:5]}")
        return np.stack([out[i] for i in indices])


class _TorchCodecSource:
    """torchcodec (PyTorch's decoder; needs the system's FFmpeg 4-8 libraries): frames by their
    exact pts from the demuxed packets, one decoder per output size (torchcodec resizes inside the
    decoder). `seek_mode="approximate"` skips torchcodec's own file scan: the index above has the
    exact times, and decoding by pts is exact in either mode."""

    def __init__(self, path: str) -> None:
        from torchcodec.decoders import VideoDecoder  # noqa: F401 - fails here when FFmpeg is absent

        self._path = path
        self.index = _stream_index(path)
        self.pts, self.fps, self.frame_end = self.index.pts, self.index.fps, self.index.frame_end
        self.width, self.height = self.index.width, self.index.height
        self._decoders: dict[tuple[int, int], Any] = {}
        self._decoder((self.width, self.height))

    def _decoder(self, size: tuple[int, int]) -> Any:
        decoder = self._decoders.get(size)
        if decoder is None:
            from torchcodec.decoders import VideoDecoder
            from torchcodec.transforms import Resize

            native = size == (self.width, self.height)
            decoder = self._decoders[size] = VideoDecoder(
                self._path, dimension_order="NHWC", num_ffmpeg_threads=1, seek_mode="approximate",
                transforms=None if native else [Resize((size[1], size[0]))])  # fmt: skip
        return decoder

    def decode(self, indices: Sequence[int], size: tuple[int, int]) -> np.ndarray:
        ix = self.index
        # A hair past each frame's start: the frame playing then is that frame, whatever rounding.
        seconds = [(ix.stream_pts(i) * ix.time_base) + 1e-6 for i in indices]
        batch = self._decoder(size).get_frames_played_at(seconds)
        return batch.data.numpy()


_SOURCES = {"decord": _DecordSource, "pyav": _PyAVSource, "torchcodec": _TorchCodecSource}


def backend_missing(backend: str) -> str | None:
    """Why `backend` cannot decode here (not installed, or torchcodec without the system's FFmpeg
    libraries), or None when it can."""
    module = {"decord": "decord", "pyav": "av", "torchcodec": "torchcodec.decoders"}[backend]
    try:
        __import__(module)
    except ImportError as exc:
        return f"video backend {backend!r} is not installed ({exc})"
    except (OSError, RuntimeError) as exc:  # torchcodec raises RuntimeError when no libavcodec loads
        gist = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"video backend {backend!r} needs the system's FFmpeg libraries (4-8): "
                f"apt-get install ffmpeg, or `make ffmpeg` ({gist[:120]})")  # fmt: skip
    return None


def _open_source(path: str, backend: str):
    if backend not in BACKENDS:
        raise ValueError(f"unknown video backend {backend!r}; choose one of {BACKENDS}")
    if not os.path.isfile(path):
        raise DataError(f"{path}: video file not found")
    if os.path.getsize(path) == 0:
        raise DataError(f"{path}: video file is empty")
    cut = mp4_truncation(path)
    if cut is not None:
        raise DataError(f"{path}: truncated or corrupt video: {cut}")
    missing = backend_missing(backend)
    if missing is not None:
        raise DataError(missing)
    try:
        _quiet_decoder_logs(backend)
        source = _SOURCES[backend](path)
    except DataError:
        raise
    except ImportError as exc:
        raise DataError(f"video backend {backend!r} is not installed ({exc})") from None
    except Exception as exc:  # decoders raise many types; the user needs the path and the gist
        raise DataError(f"{path}: cannot decode video with {backend} ({_decoder_gist(exc)})") from None
    _count("opens")
    return source


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


# The shortest side a frame may have: Qwen-VL's processors refuse images under one merged vision
# token (28 px for Qwen2.5-VL, 32 for Qwen3-VL); a small zoomed region is enlarged to it.
MIN_FRAME_SIDE = 32


def fit_region(width: int, height: int, max_pixels: int, min_side: int = MIN_FRAME_SIDE) -> tuple[int, int]:
    """Output size of a cut-out region: `fit_pixels`, then enlarged (aspect kept) so that its shorter
    side is at least `min_side`. ValueError when both cannot hold (a region thinner than
    min_side^2 / max_pixels).

    >>> fit_region(1280, 720, 50176), fit_region(40, 10, 50176)
    ((298, 168), (128, 32))
    """
    w, h = fit_pixels(width, height, max_pixels)
    if min(w, h) >= min_side:
        return w, h
    scale = min_side / min(width, height)
    w, h = max(min_side, round(width * scale)), max(min_side, round(height * scale))
    if w * h > max_pixels:
        raise ValueError(f"a {width}x{height} px region is too thin to show at least {min_side} px a side within {max_pixels} pixels")
    return w, h


def format_clock(t: float) -> str:
    """HH:MM:SS as VideoMend overlays it.

    >>> format_clock(3725.4)
    '01:02:05'
    """
    t = max(0, int(t))
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"


# Frame times are written with up to two decimals and at least one, by the env's text and by the
# renderer's frame labels alike (`tools.format_times`, one formatter, so a frame has one name). Why
# two: the times are the frames' presentation times, and at one decimal the neighbouring frames of
# any video above 10 fps print alike ("12.3s, 12.3s"), so a policy could neither tell them apart nor
# cite one; two decimals keep frames apart up to 100 fps, and more would only add tokens. Trailing
# zeros are dropped, so a frame of a 10-fps video reads "12.3s" as it did at one decimal.
def format_seconds(t: float) -> str:
    """One frame time in seconds, without the unit.

    >>> format_seconds(12), format_seconds(12.345), format_seconds(12.30), format_seconds(1.0334)
    ('12.0', '12.35', '12.3', '1.03')
    """
    text = f"{t:.2f}".rstrip("0")
    return text + "0" if text.endswith(".") else text


@lru_cache(maxsize=1)
def _font() -> ImageFont.ImageFont:
    return ImageFont.load_default()


def overlay_timestamp(frame: np.ndarray, t: float, clock: bool = True) -> np.ndarray:
    """A copy of `frame` with its time burnt into the top-left corner, white on a black box.

    `clock=True`: HH:MM:SS (`format_clock`), what `EnvConfig.timestamp_overlay` puts in the
    model's frames (VideoMend). `clock=False`: seconds as the env's text writes them ("12.5s",
    `format_seconds`), what the env's "rgb_array" render labels each frame with.
    """
    img = Image.fromarray(np.ascontiguousarray(frame))
    draw = ImageDraw.Draw(img)
    text = format_clock(t) if clock else format_seconds(t) + "s"
    _, _, x1, y1 = draw.textbbox((2, 2), text, font=_font())
    draw.rectangle((0, 0, x1 + 2, y1 + 2), fill=(0, 0, 0))
    draw.text((2, 2), text, fill=(255, 255, 255), font=_font())
    return np.asarray(img)


# ---- the reader -------------------------------------------------------------------------------
class VideoReader:
    """Random access to one video's frames by time.

    Arguments:
        path: video file.
        backend: "pyav" (default: the fastest in bench/bench_env.py, docs/data.md), "decord" or
            "torchcodec" (needs the system's FFmpeg libraries; `backend_missing` says why not).
        cache: the frame cache; the process-wide `FRAME_CACHE` by default.
    """

    def __init__(self, path: str | os.PathLike[str], backend: str = DEFAULT_BACKEND, cache: FrameCache | None = None) -> None:
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
        """Frames `indices` at most `max_pixels` each: a read-only uint8 (n,H,W,3) and their timestamps.

        The array is shared, not copied: every caller asking for the same frames at the same size
        (the G episodes of a sample at reset) gets the same read-only array from the cache, so 64
        episodes of one video hold their initial frames once. Copy it (`frames.copy()`) to draw on it.
        `VideoSeekEnv(share_frames=True)` (the episode drivers) passes this array on as the
        observation; a user's env hands out a copy of it (gymnasium's contract).
        """
        indices = [int(i) for i in indices]
        size = fit_pixels(self._src.width, self._src.height, max_pixels)
        w, h = size
        if not indices:
            return np.zeros((0, h, w, 3), np.uint8), np.zeros(0)
        times = self._src.pts[indices].copy()
        batch_key = (self._file_key, tuple(indices), size, overlay)
        batch = self.cache.peek(batch_key)
        if batch is not None:
            self.cache.count_hits(len(indices))
            return batch, times
        got: dict[int, np.ndarray] = {}
        for i in indices:
            arr = self.cache.get((self._file_key, i, size, overlay))
            if arr is not None:
                got[i] = arr
        todo: list[int] = sorted({i for i in indices if i not in got})
        if not todo:
            return self.cache.put(batch_key, np.stack([got[i] for i in indices])), times
        with self._lock:
            # Envs that missed the same frames at once queue here: the first one decodes and
            # caches them, the others find them now instead of decoding them again.
            batch = self.cache.peek(batch_key)
            if batch is not None:
                return batch, times
            for i in todo:
                arr = self.cache.peek((self._file_key, i, size, overlay))
                if arr is not None:
                    got[i] = arr
            todo = [i for i in todo if i not in got]
            raw = self._decode(todo, size) if todo else []
            for i, frame in zip(todo, raw):
                if (frame.shape[1], frame.shape[0]) != size:  # a decoder that did not scale
                    frame = np.asarray(Image.fromarray(frame).resize(size, Image.BILINEAR))
                if overlay:
                    frame = overlay_timestamp(frame, self._src.pts[i])
                got[i] = frame
            batch = self.cache.put(batch_key, np.stack([got[i] for i in indices]))
            # The new frames are cached as views of the batch: one copy of their pixels in memory
            # (the cache counts both, so it holds at most its budget, sometimes less).
            decoded = set(todo)
            for j, i in enumerate(indices):
                if i in decoded:
                    self.cache.put((self._file_key, i, size, overlay), batch[j])
        return batch, times

    def _decode(self, indices: list[int], size: tuple[int, int] | None = None) -> np.ndarray:
        """Decode `indices` at `size` (native by default; caller holds the lock); a decoder failure
        is a one-line DataError."""
        try:
            raw = self._src.decode(indices, size or (self._src.width, self._src.height))
        except DataError:
            raise
        except Exception as exc:
            pts = self._src.pts
            if len(indices) == 1:
                span = f"frame {indices[0]} ({pts[indices[0]]:.2f} s) does"
            else:
                span = f"frames {indices[0]}-{indices[-1]} ({pts[indices[0]]:.2f}-{pts[indices[-1]]:.2f} s) do"
            raise DataError(f"{self.path}: truncated or corrupt video: {span} not decode ({self.backend}: {_decoder_gist(exc)})") from None
        _count("decoded_frames", len(indices))
        return raw

    def verify_frames(self, indices: Sequence[int] | None = None, chunk: int = 32) -> int:
        """Decode frames to prove they decode, without caching them (check-data); all frames when
        `indices` is None, in runs of `chunk` consecutive ones. Returns how many were decoded;
        raises DataError "truncated or corrupt video" naming the first failing frame or run."""
        todo = list(range(self.num_frames)) if indices is None else sorted({int(i) for i in indices})
        # A spread is decoded one frame per call (each failure names its frame); every frame in
        # consecutive runs, which decode sequentially without a seek each.
        runs = [todo[k : k + chunk] for k in range(0, len(todo), chunk)] if indices is None else [[i] for i in todo]
        with self._lock:
            for run in runs:
                self._decode(run)
        return len(todo)


# Readers are shared per (path, backend): opening decord costs a few ms and G envs use one file.
_READERS: OrderedDict[tuple[str, str], VideoReader] = OrderedDict()
_READERS_LOCK = threading.Lock()
_OPENING: dict[tuple[str, str], threading.Lock] = {}  # one lock per file being opened
_MAX_OPEN_READERS = 32


def _cached_reader(key: tuple[str, str]) -> VideoReader | None:
    """The pooled reader of `key` if the file has not changed since it was opened (holds the lock)."""
    reader = _READERS.get(key)
    if reader is None:
        return None
    try:
        st = os.stat(key[0])
        fresh = reader._file_key[1:] == (st.st_size, st.st_mtime_ns)
    except OSError:
        fresh = False
    if not fresh:
        del _READERS[key]
        return None
    _READERS.move_to_end(key)
    return reader


def open_video(path: str | os.PathLike[str], backend: str = DEFAULT_BACKEND) -> VideoReader:
    """The shared `VideoReader` for `path` (bounded pool of open files, reopened if the file changed).

    Threads that open the same file at once get one reader: the first opens it under a per-file
    lock while the others wait for it (before, each opened its own decoder: 256 concurrent
    episodes on 32 threads held twice the memory and decoded 1.5x the frames). Other files open
    in parallel meanwhile.
    """
    key = (str(Path(path).resolve()), backend)
    with _READERS_LOCK:
        reader = _cached_reader(key)
        if reader is not None:
            return reader
        opening = _OPENING.setdefault(key, threading.Lock())
    with opening:
        with _READERS_LOCK:
            reader = _cached_reader(key)
            if reader is not None:
                return reader
        try:
            reader = VideoReader(path, backend=backend)
        except BaseException:
            with _READERS_LOCK:  # waiters then try themselves (and name the same error)
                if _OPENING.get(key) is opening:
                    del _OPENING[key]
            raise
        # Pooled and unlocked in one step: a thread arriving in between would open a second one.
        with _READERS_LOCK:
            _READERS[key] = reader
            while len(_READERS) > _MAX_OPEN_READERS:
                _READERS.popitem(last=False)
            if _OPENING.get(key) is opening:
                del _OPENING[key]  # waiters hold their reference; newcomers find the reader
    return reader


def probe_video(path: str | os.PathLike[str], backend: str = DEFAULT_BACKEND) -> VideoInfo:
    """Open a video and return its frame count, fps, duration and size (DataError if unusable)."""
    return open_video(path, backend).info


def check_video(path: str | os.PathLike[str], backend: str = DEFAULT_BACKEND) -> VideoInfo:
    """Cheap proof that a video is usable before episodes start: open it, read its metadata and
    decode its last frame (a cut or damaged tail is the common failure). DataError says why."""
    reader = open_video(path, backend)
    reader.verify_frames([reader.num_frames - 1])
    return reader.info


# ---- declared vs real duration ------------------------------------------------------------------
# Beyond both of these a row's `duration` is wrong, not rounded (check-data's own error threshold
# is tighter: 0.5 s / 2 %).
DURATION_WARN_S = 1.0
DURATION_WARN_REL = 0.05
_duration_warned: set[str] = set()
_duration_lock = threading.Lock()


class DurationMismatchWarning(UserWarning):
    """A sample's `duration` disagrees with its video; the video's is used."""


def durations_differ(declared: float, real: float) -> bool:
    """True when a declared duration is off the real one by more than 1 s and more than 5 %."""
    return abs(declared - real) > max(DURATION_WARN_S, DURATION_WARN_REL * real)


def reconcile_duration(path: str, declared: float | None, real: float, *, where: str = "") -> float:
    """The duration to use for a sample: its declared one, unless that disagrees with the video's
    (then the video's, so sparse frames and crops stay inside the real video). The mismatch is
    warned once per video path (`DurationMismatchWarning`), however many samples or envs use it."""
    if declared is None or not durations_differ(declared, real):
        return float(declared if declared is not None else real)
    key = str(Path(path).resolve())
    with _duration_lock:
        first = key not in _duration_warned
        _duration_warned.add(key)
    if first:
        prefix = f"{where}: " if where else ""
        warnings.warn(f"{prefix}field 'duration': {declared:g} s but {path} lasts {real:.3f} s; using the video's",
                      DurationMismatchWarning, stacklevel=2)  # fmt: skip
    return float(real)
