"""Synthetic seek-worthy video tasks and the `videoseek synth` command.

Each sample is a procedurally rendered H.264 mp4 whose answer depends on one or two short clue
intervals (0.6–3.6 s) placed so that none of the N uniform initial frames the env shows
(t_i = (i + 0.5) * duration / N, i = 0..N-1, N = 8 by default) falls inside a clue: an agent
that only looks at the sparse frames cannot see the evidence and must `crop_video` to find it.

Task kinds (one builder function each, `TASK_BUILDERS`):
    flash_shape   a coloured shape flashes briefly; what colour / what shape is it (multiple choice)
    count_flashes a row of lamps; how many light up during one short burst (numerical)
    event_order   two shapes flash at two separate moments; which comes first (multiple choice)
    direction     a ball crosses the screen once; in which of four directions (multiple choice).
                  VideoMend (seed 002, §4.2 "方向感知数据") builds direction data from antonymous
                  pairs such as "moving left <-> moving right" sharing one static scene; here the
                  scene is the same for all four directions and only the Delta carries the answer.
    speed         the same crossing is shown twice: once at its original speed and once with the
                  playback sped up 3x or slowed to 1/3x (VideoMend §4.3 "对称速度构造": original +
                  changed clip, order random, the model says which is original). The seed pairs
                  slow-downs with simple short clips and speed-ups with complex long ones so that
                  neither direction of change goes with one kind of scene; here both factors are
                  drawn with equal probability for every scene (the number of grey distractors is
                  drawn independently), the same decorrelation without a shortcut through scene
                  complexity. The stated original crossing time makes "original" identifiable.
    flash_colour  the learning curriculum's kind (`make learn`, not in the default mix): a large
                  shape flashes for 1-1.5 s; what colour is it, from all five colours in one fixed
                  option order. The answer is read straight off the clue frames, and the fixed
                  order lets a small model map a colour to its letter without reading the options.
    small_text    the zoom tool's kind (opt-in, not in the default mix): a light sign (1.5-3 % of a
                  1280x720 frame, at a random place) shows one character, printed 9-11 px tall,
                  for 1-1.25 s; which character is it (4 options). In the env's default 224x224-budget
                  frames (298x168) the character is a smudge 2-3 px tall (template matching forced
                  on it picks the right option 34 % of the time over 196 samples, chance 25 %);
                  `zoom(time, box)` on the sign returns it at native resolution, where it reads
                  right every time. So it needs both tools: `crop_video` to find the moment, `zoom`
                  to read it (agents/scripted.py's oracle; tests/envs/test_zoom.py).

Every sample carries `clue_intervals` (seconds, frame-exact spans of the visible evidence),
`options`/`answer`, a `reference_reasoning` in VideoMend's Ref-Delta form (seed 002, §3.3:
`Reference frame at <time>HH:MM:SS.m</time>`, `From <time_range>A - B</time_range>,
<delta>…</delta>`, a closing `Reasoning Summary`, then `<answer>`), `key_frames` with object boxes,
and DM-GRPO `mask_patterns` (seed 002, §5.3): a non-critical range away from every clue
(`oracle_correct` true, because the evidence is untouched) and a critical range covering the clue
whose loss makes the question unanswerable (`oracle_correct` false). Both are decided from how the
video was generated, not by running a model. The non-critical range is also a "Negligible change"
Delta of the reference reasoning, so the masked Delta is one the reasoning actually cites.

`metadata` holds `task_kind`, `task` (what a solver may know: it is stated in the question or the
options) and `generation` (every generation parameter, including the solution; solvers such as
`videoseek.envs.perceive` must not read it).

Generation is deterministic for a seed: sample i uses `numpy.random.default_rng([seed, i])`, so a
sample does not depend on how many others are made or on the number of worker processes, and the
encoder runs with x264's macroblock tree off (`write_video`), so the bytes do not depend on the
process either.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from videoseek.envs.sample import VideoSample, write_jsonl

DATA_SOURCE = "videoseek-synth"
TASK_KINDS = ("flash_shape", "count_flashes", "event_order", "direction", "speed")  # the default mix
CURRICULUM_KINDS = ("flash_colour",)  # opt-in kinds (`--kinds flash_colour`)
ZOOM_KINDS = ("small_text",)  # opt-in kinds that need `zoom(time, box)` (`--kinds small_text`)

# Saturated colours, hues at least ~50 degrees apart so lossy H.264 chroma cannot confuse them.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "yellow": (230, 200, 30),
    "green": (40, 180, 70),
    "blue": (50, 90, 230),
    "purple": (160, 60, 220),
}
SHAPES = ("circle", "square", "triangle", "diamond")
# Option text -> unit motion vector (x right, y down), in a fixed order the builder shuffles.
DIRECTIONS: dict[str, tuple[int, int]] = {
    "from left to right": (1, 0),
    "from right to left": (-1, 0),
    "from top to bottom": (0, 1),
    "from bottom to top": (0, -1),
}
SPEED_FACTORS = (3.0, 1.0 / 3.0)  # the changed crossing: sped up 3x or slowed to 1/3x (seed 002, §4.3)
# Speed options: (which crossing is original, factor of the other one). Fixed order A-D.
SPEED_OPTIONS: tuple[tuple[int, float, str], ...] = (
    (0, 3.0, "The first crossing is at the original speed; the second was sped up"),
    (0, 1.0 / 3.0, "The first crossing is at the original speed; the second was slowed down"),
    (1, 3.0, "The second crossing is at the original speed; the first was sped up"),
    (1, 1.0 / 3.0, "The second crossing is at the original speed; the first was slowed down"),
)
SIZES = ((160, 120), (192, 144), (224, 168), (256, 144), (256, 192), (320, 180), (320, 240))
FPS_CHOICES = (8, 10, 12, 15, 24, 25, 30)
# Default duration mix (weight, low s, high s): mostly short so a set renders fast.
DURATION_MIX = ((0.6, 10.0, 30.0), (0.3, 30.0, 75.0), (0.1, 75.0, 180.0))
# The smallest video each kind needs so its longest event fits between two uniform frames.
MIN_DURATION = {"flash_shape": 10.0, "flash_colour": 10.0, "count_flashes": 20.0, "event_order": 10.0, "direction": 16.0, "speed": 40.0,
                "small_text": 18.0}
# Kinds with a fixed frame size, frame rates and duration range of their own, instead of SIZES,
# FPS_CHOICES and DURATION_MIX, and a still background (a drifting one re-renders and converts every
# 720p frame, 15 ms each). small_text needs a 1280x720 source (the zoom reads it at native
# resolution) and keeps it cheap: 4 fps and 18-20 s, 72-80 frames. Between 8 uniform frames
# 2.25-2.5 s apart, less the placer's margin of 2 frames each side, there is room for a label of
# 1-1.25 s; a shorter video would have none.
FIXED_SPECS: dict[str, tuple[tuple[int, int], tuple[int, ...], tuple[float, float]]] = {
    "small_text": ((1280, 720), (4,), (18.0, 20.0)),
}
LETTERS = "ABCDEFGH"
MIN_GOP = 8  # frames between keyframes at least (`write_video`); every default frame rate is at least 8 fps
# Shortest clue interval: above the env's default shortest crop (0.5 s), so cropping exactly a clue
# is a valid call. A shorter event (a sped-up crossing) sits centred in a clue this long.
MIN_CLUE_SECONDS = 0.6


# ---- small helpers ----------------------------------------------------------------------------
def format_timestamp(seconds: float) -> str:
    """HH:MM:SS.m (tenths), VideoMend's timestamp precision (seed 002, §3.3).

    >>> format_timestamp(72.46), format_timestamp(59.97)
    ('00:01:12.5', '00:01:00.0')
    """
    tenths = int(round(max(0.0, seconds) * 10))
    h, rest = divmod(tenths, 36000)
    m, rest = divmod(rest, 600)
    return f"{h:02d}:{m:02d}:{rest // 10:02d}.{rest % 10}"


def uniform_times(duration: float, n: int = 8) -> np.ndarray:
    """The env's initial sparse sample times t_i = (i + 0.5) * duration / n."""
    return (np.arange(n) + 0.5) * duration / n


def lettered(choices: Sequence[str]) -> list[str]:
    """["A. red", "B. blue", ...]."""
    return [f"{LETTERS[k]}. {c}" for k, c in enumerate(choices)]


def place_words(cx: float, cy: float) -> str:
    """Where a normalised point lies, in words ("upper left", "centre", "lower right", ...)."""
    horiz = "left" if cx < 0.38 else "right" if cx > 0.62 else ""
    vert = "upper" if cy < 0.42 else "lower" if cy > 0.62 else ""
    words = " ".join(w for w in (vert, horiz) if w)
    return f"{words} part" if words else "centre"


def shape_mask(shape: str, size: int) -> np.ndarray:
    """Boolean (size, size) mask of a filled shape; triangles point up."""
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    c = size / 2.0
    if shape == "circle":
        return (xx - c) ** 2 + (yy - c) ** 2 <= c * c
    if shape == "square":
        return np.ones((size, size), dtype=bool)
    if shape == "triangle":
        return np.abs(xx - c) <= yy / 2.0
    if shape == "diamond":
        return np.abs(xx - c) + np.abs(yy - c) <= c
    raise ValueError(f"unknown shape {shape!r}; choose one of {SHAPES}")


# ---- the video: spec, background, sprites, lamps, rendering -----------------------------------
@dataclass(frozen=True)
class VideoSpec:
    """Frame size, rate and length; `duration` is exactly n_frames / fps (what decoders report)."""

    width: int
    height: int
    fps: int
    n_frames: int

    @property
    def duration(self) -> float:
        return self.n_frames / self.fps

    def time(self, frame: float) -> float:
        """Seconds at a (fractional) frame index: frame i is shown on [time(i), time(i + 1))."""
        return frame / self.fps


@dataclass(frozen=True)
class Sprite:
    """A coloured shape shown on frames [start, stop), its top-left corner moving at constant speed.

    `xy0` is the top-left pixel position on frame `start`; `step` the motion per frame (pixels).
    """

    name: str
    shape: str
    colour: str
    size: int
    start: int
    stop: int
    xy0: tuple[float, float]
    step: tuple[float, float] = (0.0, 0.0)

    def position(self, frame: int) -> tuple[float, float]:
        j = frame - self.start
        return self.xy0[0] + j * self.step[0], self.xy0[1] + j * self.step[1]

    def box(self, frame: int, spec: VideoSpec) -> list[float]:
        """Normalised [x1, y1, x2, y2] of the visible part at `frame`."""
        x, y = self.position(frame)
        x1, y1 = max(0.0, x) / spec.width, max(0.0, y) / spec.height
        x2, y2 = min(spec.width, x + self.size) / spec.width, min(spec.height, y + self.size) / spec.height
        return [round(min(x1, x2), 4), round(min(y1, y2), 4), round(max(x1, x2), 4), round(max(y1, y2), 4)]


@dataclass(frozen=True)
class LampRow:
    """A row of lamps at fixed pixel centres; lamp k is lit on frames [on[k][0], on[k][1])."""

    centres: tuple[tuple[int, int], ...]
    radius: int
    colour: str
    on: tuple[tuple[int, int] | None, ...]


# small_text's characters: capitals and digits that stay distinct when printed 9-11 px tall
# (no 0/O/D/Q, 1/I/J/L, 5/S, 8/B, 2/Z, 6/G, U/V/W, C).
LABEL_CHARS = "3479AEFHKMNPRTXY"
LABEL_INK = (20, 20, 20)
LABEL_PLATE = (236, 236, 230)


@lru_cache(maxsize=32)
def label_font(size: int) -> ImageFont.FreeTypeFont:
    """The font labels are printed in: Pillow's bundled default (Aileron Regular) at `size` px, the
    same on every machine with the same Pillow (no system fonts), so a reader can render the same glyphs."""
    return ImageFont.load_default(size=size)


@lru_cache(maxsize=4096)
def render_glyph(char: str, size: int) -> np.ndarray:
    """The anti-aliased coverage (float32 in [0, 1], tight to the ink) of `char` in `label_font(size)`.

    >>> render_glyph("7", 14).shape, round(float(render_glyph("7", 14).max()), 2)
    ((10, 7), 0.99)
    """
    font = label_font(size)
    left, top, right, bottom = font.getbbox(char)
    img = Image.new("L", (right - left, bottom - top), 0)
    ImageDraw.Draw(img).text((-left, -top), char, fill=255, font=font)
    cover = np.asarray(img, dtype=np.float32) / 255.0
    ys, xs = np.nonzero(cover > 0)
    out = cover[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1] if len(ys) else cover
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class Label:
    """A light sign with one dark character at its centre, shown on frames [start, stop).

    `xy` is the sign's top-left pixel, `size` its (width, height); the character is printed in
    `label_font(font_size)`.
    """

    text: str
    font_size: int
    xy: tuple[int, int]
    size: tuple[int, int]
    start: int
    stop: int

    def box(self, spec: VideoSpec) -> list[float]:
        """Normalised [x1, y1, x2, y2] of the sign."""
        (x, y), (w, h) = self.xy, self.size
        return [round(x / spec.width, 4), round(y / spec.height, 4), round((x + w) / spec.width, 4), round((y + h) / spec.height, 4)]

    def draw(self, frame: np.ndarray) -> None:
        (x, y), (w, h) = self.xy, self.size
        frame[y : y + h, x : x + w] = LABEL_PLATE
        cover = render_glyph(self.text, self.font_size)[..., None]
        gh, gw = cover.shape[:2]
        gx, gy = x + (w - gw) // 2, y + (h - gh) // 2
        under = frame[gy : gy + gh, gx : gx + gw].astype(np.float32)
        frame[gy : gy + gh, gx : gx + gw] = np.round(under * (1 - cover) + np.float32(LABEL_INK) * cover).astype(np.uint8)


def make_background(rng: np.random.Generator, spec: VideoSpec) -> tuple[np.ndarray, float, dict[str, Any]]:
    """A low-saturation tile (grey gradient, periodic texture, grey distractor shapes).

    Returns the tile, its horizontal drift in pixels per second and its parameters. Everything is
    nearly grey (chroma <= 12), so saturated task objects stand out to a pixel-level solver while
    the scene still has structure a VLM must look past.
    """
    h, w = spec.height, spec.width
    level = rng.uniform(80, 150)
    tint = rng.uniform(-6, 6, size=3)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    periods = int(rng.integers(2, 6))  # integer periods keep the rolled tile seamless
    texture = 7.0 * np.sin(2 * np.pi * periods * xx / w + rng.uniform(0, 2 * np.pi)) * np.cos(2 * np.pi * yy / h * 1.5)
    gradient = rng.uniform(-25, 25) * (yy / h - 0.5)
    tile = level + gradient + texture
    img = np.clip(tile[..., None] + tint[None, None, :], 0, 255)
    n_distractors = int(rng.integers(0, 6))
    for _ in range(n_distractors):
        size = int(rng.uniform(0.12, 0.22) * h)
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        x, y = int(rng.integers(0, w - size)), int(rng.integers(0, h - size))
        grey = float(np.clip(level + rng.choice([-1, 1]) * rng.uniform(25, 45), 0, 255))
        img[y : y + size, x : x + size][shape_mask(shape, size)] = grey
    drift = float(rng.choice([0.0, rng.uniform(1.0, 6.0)]))
    params = {"level": round(float(level), 2), "distractors": n_distractors, "drift_px_per_s": round(drift, 3), "texture_periods": periods}
    return img.astype(np.uint8), drift, params


def paste(frame: np.ndarray, mask: np.ndarray, rgb: tuple[int, int, int], x: float, y: float) -> None:
    """Paint `rgb` where `mask` (placed with its top-left at x, y) overlaps the frame, clipped."""
    h, w = frame.shape[:2]
    x0, y0 = int(round(x)), int(round(y))
    mh, mw = mask.shape
    fx0, fy0, fx1, fy1 = max(0, x0), max(0, y0), min(w, x0 + mw), min(h, y0 + mh)
    if fx0 >= fx1 or fy0 >= fy1:
        return
    sub = mask[fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0]
    frame[fy0:fy1, fx0:fx1][sub] = rgb


@dataclass(frozen=True)
class Scene:
    """Everything drawn in a video: the drifting background tile, a lamp row, sprites, labels."""

    spec: VideoSpec
    tile: np.ndarray
    drift: float  # pixels per second, horizontal
    sprites: tuple[Sprite, ...] = ()
    lamps: LampRow | None = None
    labels: tuple[Label, ...] = ()

    def shift(self, i: int) -> int:
        return int(self.drift * i / self.spec.fps) % self.spec.width

    def key(self, i: int) -> tuple:
        """Equal keys mean equal frames (lets the encoder skip re-rendering a static stretch)."""
        lit = () if self.lamps is None else tuple(on is not None and on[0] <= i < on[1] for on in self.lamps.on)
        shown = tuple((k, *(int(round(v)) for v in s.position(i))) for k, s in enumerate(self.sprites) if s.start <= i < s.stop)
        signs = tuple(k for k, label in enumerate(self.labels) if label.start <= i < label.stop)
        return self.shift(i), lit, shown, signs

    def render(self, i: int) -> np.ndarray:
        """Frame i (uint8 RGB): the drifting tile, then the lamp row, the sprites and the labels shown at i."""
        shift = self.shift(i)
        frame = np.roll(self.tile, shift, axis=1) if shift else self.tile.copy()
        if self.lamps is not None:
            disc = shape_mask("circle", 2 * self.lamps.radius)
            for (cx, cy), on in zip(self.lamps.centres, self.lamps.on):
                lit = on is not None and on[0] <= i < on[1]
                rgb = PALETTE[self.lamps.colour] if lit else (45, 45, 45)
                paste(frame, disc, rgb, cx - self.lamps.radius, cy - self.lamps.radius)
        for s in self.sprites:
            if s.start <= i < s.stop:
                x, y = s.position(i)
                paste(frame, shape_mask(s.shape, s.size), PALETTE[s.colour], x, y)
        for label in self.labels:
            if label.start <= i < label.stop:
                label.draw(frame)
        return frame


# BT.601 limited-range RGB -> YCbCr, what decoders assume for untagged SD video.
_BT601 = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]], dtype=np.float32) / 255.0


def rgb_to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) RGB -> PyAV's packed yuv420p array (H * 3 / 2, W), chroma as 2x2 means.

    Done here rather than by FFmpeg's swscale inside the encoder: numpy's result is exact and
    repeatable. (Videos that differed between runs were first blamed on swscale; the cause was
    x264's macroblock tree, see `write_video`.)
    """
    h, w, _ = rgb.shape
    p = np.moveaxis(rgb, 2, 0).astype(np.float32)
    q = (p[:, 0::2, 0::2] + p[:, 1::2, 0::2] + p[:, 0::2, 1::2] + p[:, 1::2, 1::2]) * 0.25
    m = _BT601
    out = np.empty((h * 3 // 2, w), dtype=np.uint8)
    out[:h] = np.clip(m[0, 0] * p[0] + m[0, 1] * p[1] + m[0, 2] * p[2] + 16.5, 0, 255)
    n = (h // 2) * (w // 2)
    flat = out[h:].reshape(-1)
    flat[:n] = np.clip(m[1, 0] * q[0] + m[1, 1] * q[1] + m[1, 2] * q[2] + 128.5, 0, 255).reshape(-1)
    flat[n:] = np.clip(m[2, 0] * q[0] + m[2, 1] * q[1] + m[2, 2] * q[2] + 128.5, 0, 255).reshape(-1)
    return out


def write_video(path: str | os.PathLike[str], spec: VideoSpec, frame_at: Callable[[int], np.ndarray],
                key_at: Callable[[int], Any] | None = None, crf: int = 23) -> None:
    """Encode frames 0..n-1 as H.264 (libx264, yuv420p) mp4, one keyframe per second (every
    `MIN_GOP` frames below MIN_GOP fps).

    A one-second GOP keeps a random seek to decode at most `fps` frames; below 8 fps (small_text's
    4 fps) a keyframe every 8 frames keeps a seek as cheap and halves the bytes, which keyframes
    dominate in a still 720p scene. One encoder thread per
    video: parallelism comes from worker processes. x264's macroblock tree (`mbtree`, on in every
    preset) is off: its assembly reads uninitialised memory, so with it the same frames encoded in
    two processes differed in about 4 % of the videos (some frames by one grey level). Measured: the
    same input frames, run with glibc's MALLOC_PERTURB_ at 1, 77 and 165, encoded to three different
    files with mbtree and to one file without it (tests/envs/test_synth.py checks this). With `key_at`, a frame whose key equals the
    previous frame's is not rendered or converted again (most frames of a long video are static).
    """
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=spec.fps)
        stream.width, stream.height, stream.pix_fmt = spec.width, spec.height, "yuv420p"
        gop = max(spec.fps, MIN_GOP)
        stream.codec_context.gop_size = gop
        stream.options = {"preset": "veryfast", "crf": str(crf), "threads": "1", "keyint_min": str(gop), "sc_threshold": "0",
                          "x264-params": "mbtree=0"}
        last_key, yuv = object(), None
        for i in range(spec.n_frames):
            key = key_at(i) if key_at is not None else None
            if yuv is None or key is None or key != last_key:
                yuv = rgb_to_yuv420p(frame_at(i))
                last_key = key
            for packet in stream.encode(av.VideoFrame.from_ndarray(yuv, format="yuv420p")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


# ---- placing events away from the uniform frames ----------------------------------------------
class Placer:
    """Chooses frame spans for events so that no initial uniform frame shows them.

    A span [start, stop) is allowed when no frame within `margin` frames of it is the frame the
    env shows at a uniform time (the last frame starting at or before t_i), and it keeps `gap`
    frames from spans placed earlier. Placement samples uniformly among all allowed starts, which
    is rejection sampling ("resample if a uniform time falls inside") done exactly.
    """

    def __init__(self, spec: VideoSpec, avoid_uniform: Sequence[int] = (8,), margin: int | None = None) -> None:
        self.spec = spec
        self.margin = margin if margin is not None else max(2, round(0.15 * spec.fps))
        blocked = np.zeros(spec.n_frames, dtype=bool)
        for n in avoid_uniform:
            idx = np.floor(uniform_times(spec.duration, n) * spec.fps + 1e-6).astype(int)
            for k in np.clip(idx, 0, spec.n_frames - 1):
                blocked[max(0, k - self.margin) : k + self.margin + 1] = True
        self.blocked = blocked
        self.spans: list[tuple[int, int]] = []

    def _free(self, gap: int) -> np.ndarray:
        free = ~self.blocked.copy()
        free[: self.margin] = False
        free[len(free) - self.margin :] = False
        for a, b in self.spans:
            free[max(0, a - gap) : b + gap] = False
        return free

    def longest(self, gap: int = 0) -> int:
        """Frames in the longest span that can still be placed."""
        best = run = 0
        for ok in self._free(gap):
            run = run + 1 if ok else 0
            best = max(best, run)
        return best

    def place(self, rng: np.random.Generator, length: int, gap: int = 0) -> tuple[int, int]:
        """A random allowed span of `length` frames, recorded as taken."""
        free = self._free(gap)
        # start s is allowed when free[s : s + length] is all True: a sliding-window count.
        csum = np.concatenate([[0], np.cumsum(free)])
        starts = np.nonzero(csum[length:] - csum[:-length] == length)[0] if length <= len(free) else np.array([], int)
        if len(starts) == 0:
            raise RuntimeError(f"no room for a {length}-frame event in a {self.spec.n_frames}-frame video")
        s = int(starts[int(rng.integers(len(starts)))])
        self.spans.append((s, s + length))
        return s, s + length

    def frames_for(self, rng: np.random.Generator, lo: float, hi: float, gap: int = 0, minimum: int = 3) -> int:
        """A length in frames drawn from [lo, hi] seconds, shortened to fit the free space."""
        want = int(round(rng.uniform(lo, hi) * self.spec.fps))
        return max(minimum, min_clue_frames(self.spec), min(want, self.longest(gap)))


def min_clue_frames(spec: VideoSpec) -> int:
    """Frames in the shortest clue interval (MIN_CLUE_SECONDS)."""
    return int(math.ceil(MIN_CLUE_SECONDS * spec.fps - 1e-9))


# ---- one task plan per kind ---------------------------------------------------------------------
@dataclass
class Step:
    """One Ref-Delta item: a reference at `start` (end None) or a delta over [start, end]."""

    start: float
    text: str
    end: float | None = None


@dataclass
class TaskPlan:
    """What a task builder decides: the question, the evidence and how to draw it."""

    question: str
    options: list[str] | None
    answer: str
    problem_type: str
    clues: list[tuple[int, int]]  # frame spans [start, stop) of the visible evidence
    critical: int  # index of the clue whose masking leaves the question unanswerable
    steps: list[Step]
    summary: str
    sprites: list[Sprite] = field(default_factory=list)
    lamps: LampRow | None = None
    labels: list[Label] = field(default_factory=list)
    key_frames: list[dict[str, Any]] = field(default_factory=list)
    task: dict[str, Any] = field(default_factory=dict)
    generation: dict[str, Any] = field(default_factory=dict)
    opening: str | None = None  # the reasoning's opening reference, when the default one does not fit


def _span_times(spec: VideoSpec, span: tuple[int, int]) -> tuple[float, float]:
    """Seconds [first frame start, last frame end] of a frame span."""
    return spec.time(span[0]), spec.time(span[1])


def _static_sprite(rng: np.random.Generator, spec: VideoSpec, name: str, shape: str, colour: str, span: tuple[int, int]) -> Sprite:
    """A shape resting somewhere away from the top band (where the env may burn in a clock)."""
    size = int(rng.uniform(0.22, 0.32) * spec.height)
    x = float(rng.uniform(0.08 * spec.width, 0.92 * spec.width - size))
    y = float(rng.uniform(0.32 * spec.height, 0.95 * spec.height - size))
    return Sprite(name, shape, colour, size, span[0], span[1], (x, y))


def _centre(s: Sprite, spec: VideoSpec, frame: int) -> tuple[float, float]:
    x, y = s.position(frame)
    return (x + s.size / 2) / spec.width, (y + s.size / 2) / spec.height


def flash_shape_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """A coloured shape flashes once for 0.5–1.5 s; the question asks its colour or its shape."""
    colour = str(rng.choice(list(PALETTE)))
    shape = str(rng.choice(SHAPES))
    about = str(rng.choice(["colour", "shape"]))
    span = placer.place(rng, placer.frames_for(rng, 0.5, 1.5, minimum=max(3, spec.fps // 3)))
    sprite = _static_sprite(rng, spec, f"{colour} {shape}", shape, colour, span)
    if about == "colour":
        others = [c for c in PALETTE if c != colour]
        choices = [colour] + [str(c) for c in rng.choice(others, size=3, replace=False)]
        question = "At one moment a coloured shape flashes briefly on the screen. What colour is it?"
        truth = colour
    else:
        choices = list(SHAPES)
        question = "At one moment a coloured shape flashes briefly on the screen. What shape is it?"
        truth = shape
    order = rng.permutation(len(choices))
    choices = [choices[k] for k in order]
    letter = LETTERS[choices.index(truth)]
    s, e = _span_times(spec, span)
    where = place_words(*_centre(sprite, spec, span[0]))
    mid = (span[0] + span[1] - 1) // 2
    steps = [
        Step(s, f"A {colour} {shape} has just appeared in the {where} of the frame, in front of the grey background."),
        Step(s, f"<delta>the {colour} {shape} stays still in the {where} and then vanishes; the rest of the scene shows negligible change</delta>", e),
        Step(e, "The coloured shape is gone and the frame shows only the grey background again."),
    ]
    summary = (
        f"The only coloured shape in the video is the {colour} {shape} that flashes briefly, "
        f"so its {about} is {truth}, which is option {letter}."
    )
    return TaskPlan(
        question=question, options=lettered(choices), answer=letter, problem_type="multiple_choice",
        clues=[span], critical=0, steps=steps, summary=summary, sprites=[sprite],
        key_frames=[{"time": round(spec.time(mid + 0.5), 4), "boxes": {sprite.name: sprite.box(mid, spec)}}],
        task={"question_about": about},
        generation={"colour": colour, "shape": shape, "question_about": about, "size_px": sprite.size, "xy": [round(v, 2) for v in sprite.xy0]},
    )


def flash_colour_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """A shape flashes once for 1-1.5 s; which of the five colours (fixed option order) is it."""
    colour = str(rng.choice(list(PALETTE)))
    shape = str(rng.choice(SHAPES))
    span = placer.place(rng, placer.frames_for(rng, 1.0, 1.5, minimum=max(3, spec.fps // 3)))
    # Most of the frame height: at a small model's pixel budget (112x112) the shape covers most
    # merged vision tokens of its frames, so its colour is what those frames are about.
    size = int(rng.uniform(0.8, 0.9) * spec.height)
    xy = (float(rng.uniform(0.03 * spec.width, 0.97 * spec.width - size)), float(rng.uniform(0.03 * spec.height, 0.97 * spec.height - size)))
    sprite = Sprite(f"{colour} {shape}", shape, colour, size, span[0], span[1], xy)
    choices = list(PALETTE)
    letter = LETTERS[choices.index(colour)]
    s, e = _span_times(spec, span)
    where = place_words(*_centre(sprite, spec, span[0]))
    mid = (span[0] + span[1] - 1) // 2
    steps = [
        Step(s, f"A {colour} {shape} has just appeared in the {where} of the frame."),
        Step(s, f"<delta>the {colour} {shape} stays still in the {where} and then vanishes; the rest of the scene shows negligible change</delta>", e),
    ]
    return TaskPlan(
        question="At one moment a shape flashes briefly on the screen. What colour is it?",
        options=lettered(choices), answer=letter, problem_type="multiple_choice",
        clues=[span], critical=0, steps=steps, summary=f"The flashing shape is {colour}, which is option {letter}.", sprites=[sprite],
        key_frames=[{"time": round(spec.time(mid + 0.5), 4), "boxes": {sprite.name: sprite.box(mid, spec)}}],
        task={"question_about": "colour"},
        generation={"colour": colour, "shape": shape, "size_px": sprite.size, "xy": [round(v, 2) for v in sprite.xy0]},
    )


def count_flashes_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """A row of K lamps; during one 1.5–3 s burst N distinct lamps light once each (numerical).

    Every lamp stays lit for at least 1.6x the spacing of 8 frames spread over the burst, so a
    crop of the clue with 8 frames sees each flash at least once, whatever their overlap.
    """
    k = int(rng.integers(4, 8 if spec.width >= 192 else 7))
    n = int(rng.integers(2, min(k, 6) + 1))
    colour = str(rng.choice(list(PALETTE)))
    window = placer.frames_for(rng, 1.5, 3.0, minimum=max(6, spec.fps // 2))
    span = placer.place(rng, window)
    spacing = spec.width / (k + 1)
    radius = max(3, int(min(0.25 * spacing, 0.1 * spec.height)))
    cy = int(rng.uniform(0.45, 0.8) * spec.height)
    centres = tuple((int(round(spacing * (j + 1))), cy) for j in range(k))
    lit = sorted(int(j) for j in rng.choice(k, size=n, replace=False))
    on_len = max(3, int(math.ceil(1.6 * window / 8)) + 1)
    on_len = min(on_len, window)
    starts = {j: span[0] + int(rng.integers(0, window - on_len + 1)) for j in lit}
    # Pin the burst to the whole clue: one flash starts it, another one ends it.
    first, last = (lit[int(k)] for k in rng.choice(n, size=2, replace=False))
    starts[first] = span[0]
    starts[last] = span[1] - on_len
    on = tuple((starts[j], starts[j] + on_len) if j in starts else None for j in range(k))
    lamps = LampRow(centres, radius, colour, on)
    s, e = _span_times(spec, span)
    ordinals = ", ".join(_ordinal(j + 1) for j in lit)
    steps = [
        Step(s, f"A row of {k} lamps crosses the frame; the {_ordinal(first + 1)} lamp from the left has just lit up {colour}, the others are dark."),
        Step(s, f"<delta>lamps flash {colour} one after another and go dark again: the {ordinals} lamps from the left each light up once, {n} flashes in all</delta>", e),
        Step(e, f"All {k} lamps are dark again and stay dark."),
    ]
    summary = f"{n} different lamps lit up, each exactly once, during the short burst, so the answer is {n}."
    # The key frame is the first frame with the most lamps lit at once.
    busiest = max(range(span[0], span[1]), key=lambda i: sum(on[j][0] <= i < on[j][1] for j in lit))
    boxes = {f"lamp {j + 1}": _lamp_box(centres[j], radius, spec) for j in lit if on[j][0] <= busiest < on[j][1]}
    key_frames = [{"time": round(spec.time(busiest + 0.5), 4), "boxes": boxes}]
    return TaskPlan(
        question=(
            f"A row of {k} dark lamps is shown throughout the video. At one moment some of them light up "
            "briefly, each at most once. How many lamps light up?"
        ),
        options=None, answer=str(n), problem_type="numerical", clues=[span], critical=0, steps=steps,
        summary=summary, lamps=lamps, key_frames=key_frames, task={"lamps": k},
        generation={"lamps": k, "lit": [j + 1 for j in lit], "colour": colour, "on_frames": on_len, "radius_px": radius},
    )


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _lamp_box(centre: tuple[int, int], radius: int, spec: VideoSpec) -> list[float]:
    cx, cy = centre
    return [
        round(max(0, cx - radius) / spec.width, 4), round(max(0, cy - radius) / spec.height, 4),
        round(min(spec.width, cx + radius) / spec.width, 4), round(min(spec.height, cy + radius) / spec.height, 4),
    ]


def event_order_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """Two shapes of different colours flash once each, at two separate moments; which is first?"""
    colours = [str(c) for c in rng.choice(list(PALETTE), size=2, replace=False)]
    shapes = [str(s) for s in rng.choice(SHAPES, size=2, replace=True)]
    gap = spec.fps  # at least a second between the two events: they are two separate clues
    spans = sorted(placer.place(rng, placer.frames_for(rng, 0.5, 1.2, gap=gap, minimum=max(3, spec.fps // 3)), gap=gap) for _ in range(2))
    sprites = [_static_sprite(rng, spec, f"{c} {s}", s, c, span) for c, s, span in zip(colours, shapes, spans)]
    names = [sp.name for sp in sprites]  # names[0] flashes first
    order = rng.permutation(2)
    choices = [f"the {names[k]}" for k in order]
    letter = LETTERS[choices.index(f"the {names[0]}")]
    steps: list[Step] = []
    for sp, span in zip(sprites, spans):
        s, e = _span_times(spec, span)
        where = place_words(*_centre(sp, spec, span[0]))
        steps += [
            Step(s, f"A {sp.name} has just appeared in the {where} of the frame; no other coloured shape is visible."),
            Step(s, f"<delta>the {sp.name} stays in the {where} for a moment and disappears</delta>", e),
            Step(e, "The frame shows only the grey background again."),
        ]
    summary = f"The {names[0]} flashes earlier than the {names[1]}, so the {names[0]} appears first, which is option {letter}."
    key_frames = []
    for sp, span in zip(sprites, spans):
        mid = (span[0] + span[1] - 1) // 2
        key_frames.append({"time": round(spec.time(mid + 0.5), 4), "boxes": {sp.name: sp.box(mid, spec)}})
    return TaskPlan(
        question=f"Two coloured shapes each flash briefly once in this video: a {names[order[0]]} and a {names[order[1]]}. Which one appears first?",
        options=lettered(choices), answer=letter, problem_type="multiple_choice", clues=spans, critical=0,
        steps=steps, summary=summary, sprites=sprites, key_frames=key_frames, task={},
        generation={"first": names[0], "second": names[1], "frames": [list(s) for s in spans]},
    )


def _crossing_sprite(name: str, colour: str, size: int, spec: VideoSpec, span: tuple[int, int], vector: tuple[int, int], lane: float) -> Sprite:
    """A ball crossing the frame along `vector`, visible on exactly the frames of `span`.

    It travels (frame side + ball size) pixels in n = len(span) frames at constant speed, at
    half-step phase: on the first frame it has just entered, after the last it has just left.
    So the crossing time is n / fps and the speed (side + size) / (n / fps).
    """
    n = span[1] - span[0]
    side = spec.width if vector[0] else spec.height
    step = (side + size) / n
    along = -size + 0.5 * step
    if vector[0] < 0 or vector[1] < 0:
        along = side - 0.5 * step  # entering from the far edge: top-left starts just inside it
    if vector[0]:
        return Sprite(name, "circle", colour, size, span[0], span[1], (along, lane * spec.height - size / 2), (vector[0] * step, 0.0))
    return Sprite(name, "circle", colour, size, span[0], span[1], (lane * spec.width - size / 2, along), (0.0, vector[1] * step))


def direction_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """A ball crosses the frame once in 1–3 s, in one of four directions (VideoMend §4.2)."""
    colour = str(rng.choice(list(PALETTE)))
    texts = list(DIRECTIONS)
    truth = texts[int(rng.integers(4))]
    vector = DIRECTIONS[truth]
    size = int(rng.uniform(0.15, 0.22) * spec.height)
    # Horizontal lanes stay below the top band; vertical lanes right of centre (clock overlay is top-left).
    lane = float(rng.uniform(0.45, 0.8)) if vector[0] else float(rng.uniform(0.6, 0.85))
    span = placer.place(rng, placer.frames_for(rng, 1.0, 3.0, minimum=max(6, spec.fps // 2)))
    ball = _crossing_sprite(f"{colour} ball", colour, size, spec, span, vector, lane)
    choices = [texts[k] for k in rng.permutation(4)]
    letter = LETTERS[choices.index(truth)]
    s, e = _span_times(spec, span)
    src, dst = _edge_words(vector)
    steps = [
        Step(s, f"A {colour} ball is entering the frame at its {src} edge; the rest of the scene is the grey background."),
        Step(s, f"<delta>the {colour} ball moves steadily {truth} across the whole frame and leaves through the {dst} edge</delta>", e),
        Step(e, "The ball has left the frame and the scene is empty again."),
    ]
    summary = f"The ball enters at the {src} edge and exits at the {dst} edge, so it moves {truth}, which is option {letter}."
    mid = (span[0] + span[1] - 1) // 2
    return TaskPlan(
        question=f"A {colour} ball crosses the screen once during the video. In which direction does it move?",
        options=lettered(choices), answer=letter, problem_type="multiple_choice", clues=[span], critical=0,
        steps=steps, summary=summary, sprites=[ball],
        key_frames=[{"time": round(spec.time(mid + 0.5), 4), "boxes": {ball.name: ball.box(mid, spec)}}], task={},
        generation={"direction": truth, "colour": colour, "size_px": size, "lane": round(lane, 4), "crossing_frames": span[1] - span[0]},
    )


def _edge_words(vector: tuple[int, int]) -> tuple[str, str]:
    return {(1, 0): ("left", "right"), (-1, 0): ("right", "left"), (0, 1): ("top", "bottom"), (0, -1): ("bottom", "top")}[vector]


def speed_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """The same crossing twice: one at the original speed, one sped up 3x or slowed to 1/3x.

    Seed 002, §4.3 symmetric speed construction (see the module docstring for how it is adapted).
    The original crossing takes T0 in [1.0, 1.2] s, so the changed one takes T0/3 or 3*T0.
    """
    colour = str(rng.choice(list(PALETTE)))
    t0 = float(rng.uniform(1.0, 1.2))
    factor = SPEED_FACTORS[int(rng.integers(2))]
    vector = (1, 0) if rng.integers(2) else (-1, 0)
    size = int(rng.uniform(0.15, 0.22) * spec.height)
    lane = float(rng.uniform(0.45, 0.8))
    original_len = max(3, int(round(t0 * spec.fps)))
    changed_len = max(3, int(round(t0 / factor * spec.fps)))
    gap = 3 * spec.fps  # crossings at least 3 s apart: two clearly separate clips
    # The longer crossing is placed first (it is the one that may not fit later); both are placed
    # uniformly among the allowed spans, so either may come first in time.
    shortest = min_clue_frames(spec)
    if changed_len > original_len:
        changed_clue = placer.place(rng, max(changed_len, shortest), gap=gap)
        original_clue = placer.place(rng, max(original_len, shortest), gap=gap)
    else:
        original_clue = placer.place(rng, max(original_len, shortest), gap=gap)
        changed_clue = placer.place(rng, max(changed_len, shortest), gap=gap)
    clues = sorted([original_clue, changed_clue])
    changed = clues.index(changed_clue)
    original = 1 - changed
    # A crossing shorter than its clue (sped up) runs centred in it.
    lengths = [original_len, changed_len] if original == 0 else [changed_len, original_len]
    spans = [(c[0] + (c[1] - c[0] - n) // 2, c[0] + (c[1] - c[0] - n) // 2 + n) for c, n in zip(clues, lengths)]
    sprites = [_crossing_sprite(f"{colour} ball", colour, size, spec, sp, vector, lane) for sp in spans]
    letter = next(LETTERS[k] for k, (orig, f, _) in enumerate(SPEED_OPTIONS) if orig == original and f == factor)
    src, dst = _edge_words(vector)
    how = "about three times faster than" if factor > 1 else "about three times slower than"
    steps: list[Step] = []
    for k, sp in enumerate(spans):
        s, e = _span_times(spec, sp)
        pace = "at the original pace" if k == original else how + " the original pace"
        steps += [
            Step(s, f"The {colour} ball is entering at the {src} edge of the frame."),
            Step(s, f"<delta>the ball moves from the {src} edge to the {dst} edge {pace}</delta>", e),
            Step(e, "The ball has left the frame; the scene is empty."),
        ]
    which = ["first", "second"]
    summary = (
        f"The {which[original]} crossing matches the original crossing time, while the {which[changed]} one is "
        f"{'much faster' if factor > 1 else 'much slower'}, so the {which[changed]} crossing was "
        f"{'sped up' if factor > 1 else 'slowed down'}, which is option {letter}."
    )
    key_frames = []
    for sp, ball in zip(spans, sprites):
        mid = (sp[0] + sp[1] - 1) // 2
        key_frames.append({"time": round(spec.time(mid + 0.5), 4), "boxes": {ball.name: ball.box(mid, spec)}})
    return TaskPlan(
        question=(
            f"A {colour} ball crosses the screen twice. At its original speed one crossing takes about {t0:.1f} seconds. "
            "One crossing plays at the original speed; the other was sped up or slowed down. Which statement is true?"
        ),
        options=lettered([text for _, _, text in SPEED_OPTIONS]), answer=letter, problem_type="multiple_choice",
        clues=clues, critical=changed, steps=steps, summary=summary, sprites=sprites, key_frames=key_frames,
        task={"original_crossing_seconds": round(t0, 1)},
        generation={
            "original_crossing_seconds": round(t0, 4), "changed_crossing": which[changed], "factor": factor,
            "direction": "left to right" if vector[0] > 0 else "right to left", "size_px": size,
            "crossing_frames": [sp[1] - sp[0] for sp in spans],
        },
    )


def small_text_task(rng: np.random.Generator, spec: VideoSpec, placer: Placer) -> TaskPlan:
    """A sign printed with one small character shows for 1-2 s (1-1.25 s fit between the uniform
    frames of FIXED_SPECS' videos); which character (4 options)?

    The sign covers 1.5-3 % of the frame and the character 9-11 px of its height (font 13-16 px):
    about 2.5 px in the env's default 298x168 frames, where it cannot be read, and plain in a zoom
    on the sign, which returns it at the source's resolution (the video must be large: FIXED_SPECS).
    """
    char = str(rng.choice(list(LABEL_CHARS)))
    font_size = int(rng.integers(13, 17))
    area = float(rng.uniform(0.015, 0.03)) * spec.width * spec.height
    aspect = float(rng.uniform(1.3, 1.8))
    w, h = int(round(math.sqrt(area * aspect))), int(round(math.sqrt(area / aspect)))
    # Below the top band (where the env may burn in a clock), inside the frame.
    x = int(rng.integers(int(0.03 * spec.width), int(0.97 * spec.width) - w))
    y = int(rng.integers(int(0.15 * spec.height), int(0.97 * spec.height) - h))
    span = placer.place(rng, placer.frames_for(rng, 1.0, 2.0, minimum=spec.fps))
    label = Label(char, font_size, (x, y), (w, h), span[0], span[1])
    others = [c for c in LABEL_CHARS if c != char]
    choices = [char] + [str(c) for c in rng.choice(others, size=3, replace=False)]
    choices = [choices[k] for k in rng.permutation(4)]
    letter = LETTERS[choices.index(char)]
    s, e = _span_times(spec, span)
    where = place_words((x + w / 2) / spec.width, (y + h / 2) / spec.height)
    box = label.box(spec)
    box_text = ", ".join(f"{v:.2f}" for v in box)
    steps = [
        Step(s, f"A small light sign has appeared in the {where} of the frame; the character printed on it is too small to read at this size."),
        Step(s, f"<delta>the sign stays still in the {where} and then vanishes; zoomed in on it at full resolution (box [{box_text}]), "
                f"it shows the character {char}</delta>", e),
        Step(e, "The sign is gone and the frame shows only the grey background again."),
    ]
    mid = (span[0] + span[1] - 1) // 2
    return TaskPlan(
        question="At one moment a small sign with one character printed on it appears on the screen. What character does it show?",
        options=lettered(choices), answer=letter, problem_type="multiple_choice", clues=[span], critical=0, steps=steps,
        summary=f"Zoomed in, the sign shows the character {char}, which is option {letter}.", labels=[label],
        key_frames=[{"time": round(spec.time(mid + 0.5), 4), "boxes": {"sign": box}}],
        task={"question_about": "character"},
        generation={"char": char, "font_size": font_size, "glyph_px": list(render_glyph(char, font_size).shape), "sign_px": [w, h],
                    "xy": [x, y], "sign_area": round(w * h / (spec.width * spec.height), 4)},
        opening="A grey, softly textured background; no sign is visible yet.",
    )


TASK_BUILDERS: dict[str, Callable[[np.random.Generator, VideoSpec, Placer], TaskPlan]] = {
    "flash_shape": flash_shape_task,
    "flash_colour": flash_colour_task,
    "count_flashes": count_flashes_task,
    "event_order": event_order_task,
    "direction": direction_task,
    "speed": speed_task,
    "small_text": small_text_task,
}


# ---- assembling a sample -------------------------------------------------------------------------
def choose_spec(rng: np.random.Generator, kind: str, min_duration: float = 10.0, max_duration: float = 180.0) -> VideoSpec:
    """Frame size, rate and length for one sample: the default mix (or the kind's `FIXED_SPECS`),
    at least the kind's minimum."""
    if kind in FIXED_SPECS:
        (w, h), rates, (lo, hi) = FIXED_SPECS[kind]
        floor = max(min_duration, MIN_DURATION[kind])
        duration = float(np.clip(rng.uniform(lo, hi), floor, max(floor, max_duration)))
        fps = int(rates[int(rng.integers(len(rates)))])
        return VideoSpec(w, h, fps, int(round(duration * fps)))
    w, h = SIZES[int(rng.integers(len(SIZES)))]
    weights = np.array([m[0] for m in DURATION_MIX])
    _, lo, hi = DURATION_MIX[int(rng.choice(len(DURATION_MIX), p=weights / weights.sum()))]
    floor = max(min_duration, MIN_DURATION[kind])
    duration = float(np.clip(rng.uniform(lo, hi), floor, max(floor, max_duration)))
    fps_pool = [f for f in FPS_CHOICES if (kind != "speed" or f >= 15) and (duration <= 75 or f <= 15)]
    fps = int(fps_pool[int(rng.integers(len(fps_pool)))])
    return VideoSpec(w, h, fps, int(round(duration * fps)))


def choose_noncritical(rng: np.random.Generator, spec: VideoSpec, clues: Sequence[tuple[int, int]]) -> tuple[float, float] | None:
    """A whole-second range [k, k + w] (w = 2, else 1, else 0) whose masked frames touch no clue.

    DM-GRPO blanks every frame whose floor(time) lies in [floor(s), floor(e)], so the range
    [k, k + w] blanks times [k, k + w + 1); that stretch, widened by one frame each side of every
    clue, must be clue-free and must end inside the video.
    """
    seconds = int(math.floor(spec.duration))
    busy = np.zeros(seconds + 1, dtype=bool)
    for a, b in clues:
        lo, hi = max(0.0, (a - 1) / spec.fps), (b + 1) / spec.fps
        busy[int(math.floor(lo)) : int(math.ceil(hi))] = True
    for width in (2, 1, 0):
        ks = [k for k in range(0, seconds - width) if not busy[k : k + width + 1].any()]
        if ks:
            k = ks[int(rng.integers(len(ks)))]
            return float(k), float(k + width)
    return None


def build_reasoning(steps: Sequence[Step], summary: str, answer: str, scene: str) -> str:
    """The Ref-Delta chain of thought (seed 002, §3.3) with HH:MM:SS.m timestamps, then the answer.

    An opening reference at 00:00:00.0 describes the scene; the steps follow in time order (a
    stable sort, so a reference at t stays before the delta starting at t); the summary cites no
    timestamp. Every timestamp is thus non-decreasing, as VideoMend's timestamp reward requires.
    """
    lines = [f"Reference frame at <time>{format_timestamp(0.0)}</time>: {scene}"]
    for st in sorted(steps, key=lambda st: st.start):
        if st.end is None:
            lines.append(f"Reference frame at <time>{format_timestamp(st.start)}</time>: {st.text}")
        else:
            lines.append(f"From <time_range>{format_timestamp(st.start)} - {format_timestamp(st.end)}</time_range>, {st.text}.")
    lines.append(f"Reasoning Summary: {summary}")
    return "<think>\n" + "\n\n".join(lines) + "\n</think>\n<answer>" + answer + "</answer>"


def make_sample(seed: int, index: int, kind: str, video_dir: str | os.PathLike[str], *, avoid_uniform: Sequence[int] = (8,),
                min_duration: float = 10.0, max_duration: float = 180.0, crf: int = 23) -> VideoSample:
    """Render sample `index` of the set for `seed` (kind `kind`), write its mp4, return the sample."""
    if kind not in TASK_BUILDERS:
        raise ValueError(f"unknown task kind {kind!r}; choose from {', '.join(TASK_BUILDERS)}")
    rng = np.random.default_rng([seed, index])
    spec = choose_spec(rng, kind, min_duration, max_duration)
    tile, drift, background = make_background(rng, spec)
    if kind in FIXED_SPECS:  # a still scene (see FIXED_SPECS)
        drift, background = 0.0, {**background, "drift_px_per_s": 0.0}
    placer = Placer(spec, avoid_uniform)
    plan = TASK_BUILDERS[kind](rng, spec, placer)
    clue_times = [_span_times(spec, c) for c in plan.clues]
    quiet = choose_noncritical(rng, spec, plan.clues)
    steps = list(plan.steps)
    masks = []
    if quiet is not None:
        steps.append(Step(quiet[0], "<delta>Negligible change: only the grey background drifts and nothing appears</delta>", quiet[1]))
        masks.append({"time_range": [quiet[0], quiet[1]], "oracle_correct": True})
    c0, c1 = clue_times[plan.critical]
    masks.append({"time_range": [round(c0, 4), round(c1, 4)], "oracle_correct": False})
    opening = "A grey, softly textured background" + (
        f" with {background['distractors']} grey shapes" if background["distractors"] else "") + "; no coloured object is visible yet."
    if plan.lamps is not None:
        opening = f"A row of {len(plan.lamps.centres)} dark lamps on a grey, softly textured background; nothing is lit."
    if plan.opening is not None:
        opening = plan.opening
    reasoning = build_reasoning(steps, plan.summary, plan.answer, opening)
    sample_id = f"synth-{seed}-{index:05d}-{kind}"
    video_path = Path(video_dir) / f"{sample_id}.mp4"
    scene = Scene(spec, tile, drift, tuple(plan.sprites), plan.lamps, tuple(plan.labels))
    write_video(video_path, spec, scene.render, key_at=scene.key, crf=crf)
    return VideoSample(
        id=sample_id, video=str(video_path.resolve()), question=plan.question, options=plan.options, answer=plan.answer,
        problem_type=plan.problem_type, duration=spec.duration,
        clue_intervals=[(round(s, 4), round(e, 4)) for s, e in clue_times],
        reference_reasoning=reasoning, key_frames=plan.key_frames, mask_patterns=masks, data_source=DATA_SOURCE,
        metadata={
            "task_kind": kind,
            "task": plan.task,
            "generation": {
                "seed": seed, "index": index, "width": spec.width, "height": spec.height, "fps": spec.fps,
                "n_frames": spec.n_frames, "clue_frames": [list(c) for c in plan.clues], "critical_clue": plan.critical,
                "avoid_uniform": list(avoid_uniform), "background": background, **plan.generation,
            },
        },
    )


def kinds_for(n: int, seed: int, kinds: Sequence[str]) -> list[str]:
    """Balanced kinds: each block of len(kinds) samples holds every kind once, in a seeded order."""
    rng = np.random.default_rng([seed, 2**31 - 1])
    out: list[str] = []
    while len(out) < n:
        out += [kinds[k] for k in rng.permutation(len(kinds))]
    return out[:n]


def _make_sample_job(job: tuple) -> dict[str, Any]:
    seed, index, kind, video_dir, kwargs = job
    return make_sample(seed, index, kind, video_dir, **kwargs).model_dump(mode="json")


def generate_dataset(out_dir: str | os.PathLike[str], n: int, seed: int = 0, kinds: Sequence[str] | None = None, *,
                     workers: int = 1, avoid_uniform: Sequence[int] = (8,), min_duration: float = 10.0,
                     max_duration: float = 180.0, crf: int = 23, progress: bool = False) -> list[VideoSample]:
    """Write `n` synthetic samples: `out_dir/videos/*.mp4` and `out_dir/samples.jsonl`.

    Arguments:
        kinds: task kinds to use (default all of `TASK_KINDS`), balanced round-robin in a seeded order.
        workers: processes rendering in parallel (results do not depend on it).
        avoid_uniform: numbers of uniform initial frames whose times must miss every clue.
        min_duration, max_duration: clamp the default duration mix (seconds); a kind's own minimum
            (`MIN_DURATION`) still applies so its events fit between uniform frames.
        crf: x264 quality (lower is larger and closer to the rendered colours).
    Returns the samples with absolute video paths (the JSONL stores them relative to `out_dir`).
    """
    kinds = list(TASK_KINDS if kinds is None else kinds)
    unknown = [k for k in kinds if k not in TASK_BUILDERS]
    if unknown or not kinds:
        raise ValueError(f"unknown task kinds {unknown}; choose from {', '.join(TASK_BUILDERS)}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not (0 < min_duration <= max_duration):
        raise ValueError(f"need 0 < min_duration <= max_duration, got {min_duration}, {max_duration}")
    out = Path(out_dir)
    video_dir = out / "videos"
    video_dir.mkdir(parents=True, exist_ok=True)
    kwargs = {"avoid_uniform": tuple(avoid_uniform), "min_duration": min_duration, "max_duration": max_duration, "crf": crf}
    jobs = [(seed, i, kind, str(video_dir), kwargs) for i, kind in enumerate(kinds_for(n, seed, kinds))]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, desc="synth", unit="video")
    rows: list[dict[str, Any]] = []
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            for row in pool.map(_make_sample_job, jobs):
                rows.append(row)
                if bar:
                    bar.update()
    else:
        for job in jobs:
            rows.append(_make_sample_job(job))
            if bar:
                bar.update()
    if bar:
        bar.close()
    samples = [VideoSample.model_validate(r) for r in rows]
    write_jsonl(samples, out / "samples.jsonl")
    return samples


# ---- the `videoseek synth` command ---------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output folder (videos/ and samples.jsonl are written there)")
    parser.add_argument("--n", type=int, default=50, help="number of samples (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="random seed; the same seed gives the same set (default 0)")
    parser.add_argument("--kinds", default=",".join(TASK_KINDS),
                        help=f"comma-separated task kinds (default: {','.join(TASK_KINDS)}; also {','.join(CURRICULUM_KINDS + ZOOM_KINDS)}: "
                             "small_text is 1280x720 and needs the zoom tool, `--tools crop_video,zoom`)")
    parser.add_argument("--workers", type=int, default=1, help="parallel rendering processes (default 1)")
    parser.add_argument("--min-duration", type=float, default=10.0, help="shortest video in seconds (default 10)")
    parser.add_argument("--max-duration", type=float, default=180.0,
                        help="longest video in seconds (default 180); a kind's own minimum still applies (speed 40, count_flashes 20, direction 16, "
                             "small_text 18: its videos run 18-20 s)")
    parser.add_argument("--avoid-uniform", default="8", help="comma-separated counts of uniform initial frames that must miss every clue (default 8)")


def run(args: argparse.Namespace) -> int:
    from videoseek.envs.errors import UserError

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in TASK_BUILDERS]
    if unknown or not kinds:
        raise UserError(f"--kinds: unknown task kind(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(TASK_BUILDERS)}")
    if args.n < 1:
        raise UserError(f"--n must be at least 1, got {args.n}")
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    if not (0 < args.min_duration <= args.max_duration):
        raise UserError(f"--min-duration/--max-duration: need 0 < min <= max, got {args.min_duration}, {args.max_duration}")
    try:
        avoid = tuple(int(v) for v in args.avoid_uniform.split(",") if v.strip())
    except ValueError:
        raise UserError(f"--avoid-uniform: expected comma-separated integers, got {args.avoid_uniform!r}") from None
    if not avoid or min(avoid) < 1:
        raise UserError(f"--avoid-uniform: counts must be positive integers, got {args.avoid_uniform!r}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out: {out} exists and is not a folder")
    started = time.perf_counter()
    samples = generate_dataset(out, args.n, seed=args.seed, kinds=kinds, workers=args.workers, avoid_uniform=avoid,
                               min_duration=args.min_duration, max_duration=args.max_duration, progress=True)
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.metadata["task_kind"]] = counts.get(s.metadata["task_kind"], 0) + 1
    total = sum(s.duration or 0 for s in samples)
    print(f"wrote {len(samples)} samples ({total:.0f} s of video) to {out / 'samples.jsonl'} in {time.perf_counter() - started:.1f} s")
    print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0
