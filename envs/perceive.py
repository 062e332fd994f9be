"""Scripted pixel-level solvers ("perceivers") for the synthetic tasks of `videoseek.envs.synth`.

`perceive(sample, frames, timestamps)` answers a synthetic sample from the frames an agent has
seen, the way a perfect eye would: it finds the saturated task objects (every synthetic scene is
otherwise nearly grey, and the env's clock overlay is white on black), then measures colour,
shape, count, order, direction or speed. It returns the answer in the sample's format (an option
letter, or a number for numerical samples), or None when the frames do not show enough.

It reads only what a solver may know: `question`, `options`, `problem_type`, `metadata["task_kind"]`
and `metadata["task"]` (facts stated in the question). Never `answer`, `clue_intervals`,
`reference_reasoning`, `key_frames`, `mask_patterns` or `metadata["generation"]`.

Frames are uint8 (n, H, W, 3) RGB as the env returns them: possibly resized to a pixel budget,
possibly with a burnt-in clock, with H.264's colour shifts and chroma bleeding. Hand-written
rather than a vision library: the scenes are built for exactly these measurements (saturation
separates objects from the scene), and numpy keeps it dependency-free and fast (well under a
millisecond per frame at these sizes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from videoseek.envs.synth import DIRECTIONS, PALETTE, SHAPES, SPEED_OPTIONS

# Decoded grey scenes stay below ~30 chroma (max - min of RGB); task colours are above ~140.
MIN_CHROMA = 70
# Smallest object worth believing, as a fraction of the frame's pixels (and at least a few pixels).
MIN_AREA = 0.0012
# Shape prototypes: (fill ratio of the bounding box, centroid offset below the box centre / box height).
SHAPE_FEATURES = {"circle": (math.pi / 4, 0.0), "square": (1.0, 0.0), "triangle": (0.5, 1 / 6), "diamond": (0.5, 0.0)}
# Two visible frames more than this many seconds apart belong to different crossings.
SEGMENT_GAP_S = 1.5


def hue(rgb: Sequence[float]) -> float:
    """Hue of one RGB colour in degrees [0, 360).

    >>> round(hue((220, 40, 40))), round(hue((50, 90, 230)))
    (0, 227)
    >>> hues(np.array([[220, 40, 40], [50, 90, 230], [9, 9, 9]])).round().tolist()
    [0.0, 227.0, 0.0]
    """
    r, g, b = (float(v) for v in rgb)
    hi, lo = max(r, g, b), min(r, g, b)
    c = hi - lo
    if c <= 0:
        return 0.0
    if hi == r:
        h = ((g - b) / c) % 6
    elif hi == g:
        h = (b - r) / c + 2
    else:
        h = (r - g) / c + 4
    return (60.0 * h) % 360.0


# Hue of each palette colour, degrees.
PALETTE_HUES = {name: hue(rgb) for name, rgb in PALETTE.items()}


def hues(rgb: np.ndarray) -> np.ndarray:
    """Hue in degrees of each row of an (n, 3) RGB array (vectorised `hue`)."""
    x = np.asarray(rgb, dtype=np.float64).reshape(-1, 3)
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    hi, lo = x.max(axis=1), x.min(axis=1)
    c = np.where(hi > lo, hi - lo, 1.0)
    h = np.where(hi == r, ((g - b) / c) % 6, np.where(hi == g, (b - r) / c + 2, (r - g) / c + 4))
    return np.where(hi > lo, (60.0 * h) % 360.0, 0.0)


def hue_distance(a, b):
    """Angular distance of hues in degrees (0..180); works on floats and arrays."""
    d = np.abs(np.asarray(a, dtype=np.float64) - b) % 360.0
    out = np.minimum(d, 360.0 - d)
    return float(out) if out.ndim == 0 else out


def chroma(frames: np.ndarray) -> np.ndarray:
    """max - min over the colour channels: 0 for greys (and the clock overlay), high for colours."""
    f = frames.astype(np.int16)
    return f.max(axis=-1) - f.min(axis=-1)


@dataclass(frozen=True)
class Blob:
    """The saturated pixels of one frame: extent, centre and colour (pixel units)."""

    area: int
    x0: int
    y0: int
    x1: int  # inclusive
    y1: int
    cx: float
    cy: float
    rgb: tuple[float, float, float]
    fill: float  # area / bounding-box area
    y_offset: float  # (centroid y - box centre y) / box height
    touches_edge: bool


def find_blob(frame: np.ndarray, min_chroma: int = MIN_CHROMA) -> Blob | None:
    """The saturated object of a frame, or None if fewer than MIN_AREA of its pixels are coloured.

    Two passes: a fixed threshold finds the object, then a threshold at half its median chroma
    re-draws the outline, which is where blurred or chroma-subsampled edges cross half-way.
    """
    h, w = frame.shape[:2]
    c = chroma(frame)
    core = c >= min_chroma
    if core.sum() < max(4, MIN_AREA * h * w):
        return None
    mask = c >= max(min_chroma * 0.5, 0.5 * float(np.median(c[core])))
    ys, xs = np.nonzero(mask)
    x0, x1, y0, y1 = int(xs.min()), int(xs.max()), int(ys.min()), int(ys.max())
    bw, bh = x1 - x0 + 1, y1 - y0 + 1
    rgb = frame[core].astype(np.float64).mean(axis=0)
    return Blob(
        area=int(mask.sum()), x0=x0, y0=y0, x1=x1, y1=y1, cx=float(xs.mean()) + 0.5, cy=float(ys.mean()) + 0.5,
        rgb=(float(rgb[0]), float(rgb[1]), float(rgb[2])), fill=float(mask.sum()) / (bw * bh),
        y_offset=(float(ys.mean()) + 0.5 - (y0 + y1 + 1) / 2) / bh,
        touches_edge=x0 == 0 or y0 == 0 or x1 == w - 1 or y1 == h - 1,
    )


def option_texts(options: Sequence[str] | None) -> list[str]:
    """Option bodies without their "A. " prefixes."""
    out = []
    for o in options or []:
        head, sep, body = o.partition(". ")
        out.append(body.strip() if sep and len(head) == 1 else o.strip())
    return out


def colour_named(text: str) -> str | None:
    """The palette colour named in a text (whole word), or None."""
    words = set(text.lower().replace(",", " ").split())
    found = [c for c in PALETTE if c in words]
    return found[0] if len(found) == 1 else None


def nearest_colour(rgb: Sequence[float], names: Sequence[str]) -> str:
    """The palette colour among `names` whose hue is closest to `rgb`'s."""
    h = hue(rgb)
    return min(names, key=lambda n: hue_distance(h, PALETTE_HUES[n]))


def nearest_shape(blob: Blob, names: Sequence[str]) -> str:
    """The shape among `names` whose (fill ratio, centroid offset) prototype is nearest."""
    def dist(name: str) -> float:
        fill, off = SHAPE_FEATURES[name]
        return abs(blob.fill - fill) + 2.0 * abs(blob.y_offset - off)

    return min(names, key=dist)


def _sorted(frames: np.ndarray, timestamps: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Frames in time order, one per distinct timestamp."""
    t = np.asarray(timestamps, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t = t[order]
    keep = np.concatenate([[True], np.diff(t) > 1e-6]) if len(t) else np.zeros(0, bool)
    return np.asarray(frames)[order][keep], t[keep]


# ---- one solver per task kind -------------------------------------------------------------------
def solve_flash_shape(sample, frames: np.ndarray, times: np.ndarray) -> str | None:
    """Colour or shape of the flashed shape, from the frame where it shows largest."""
    texts = option_texts(sample.options)
    blobs = [b for b in (find_blob(f) for f in frames) if b is not None]
    if not blobs or not texts:
        return None
    if all(t in PALETTE for t in texts):
        colours = [nearest_colour(b.rgb, texts) for b in blobs]
        guess = max(set(colours), key=colours.count)
    elif all(t in SHAPES for t in texts):
        whole = [b for b in blobs if not b.touches_edge] or blobs
        best = max(whole, key=lambda b: b.area)
        guess = nearest_shape(best, texts)
    else:
        return None
    return "ABCDEFGH"[texts.index(guess)]


def lamp_positions(frame: np.ndarray) -> list[float]:
    """Normalised x centres of the lit (saturated) lamps in one frame, by column runs."""
    h, w = frame.shape[:2]
    c = chroma(frame)
    if (c >= MIN_CHROMA).sum() < 3:
        return []
    cols = (c >= MIN_CHROMA).sum(axis=0) > 0
    centres, start = [], None
    for x, on in enumerate(np.append(cols, False)):
        if on and start is None:
            start = x
        elif not on and start is not None:
            if x - start >= 2:  # a one-column run is coding noise, not a lamp
                centres.append((start + x) / 2 / w)
            start = None
    return centres


def solve_count_flashes(sample, frames: np.ndarray, times: np.ndarray, tolerance: float = 0.04) -> str | None:
    """How many distinct lamps are seen lit in any frame (lamps are >= 1/8 frame width apart)."""
    seen: list[float] = []
    for f in frames:
        for x in lamp_positions(f):
            if all(abs(x - s) > tolerance for s in seen):
                seen.append(x)
    return str(len(seen)) if seen else None


def solve_event_order(sample, frames: np.ndarray, times: np.ndarray, hue_tolerance: float = 25.0) -> str | None:
    """Which option's colour shows up first; None unless both are seen."""
    texts = option_texts(sample.options)
    colours = [colour_named(t) for t in texts]
    if len(colours) < 2 or any(c is None for c in colours):
        return None
    first_seen: dict[str, float] = {}
    for f, t in zip(frames, times):
        c = chroma(f)
        core = c >= MIN_CHROMA
        if core.sum() < max(4, MIN_AREA * core.size):
            continue
        frame_hues = hues(f[core])
        for name in colours:
            near = float(np.mean(hue_distance(frame_hues, PALETTE_HUES[name]) <= hue_tolerance))
            if near >= 0.5 and name not in first_seen:
                first_seen[name] = float(t)
    if not all(c in first_seen for c in colours) or len({first_seen[c] for c in colours}) < len(colours):
        return None  # an event not seen, or two first seen in the same frame: order unknown
    first = min(colours, key=lambda c: first_seen[c])
    return "ABCDEFGH"[colours.index(first)]


def _track(frames: np.ndarray, times: np.ndarray) -> list[tuple[float, Blob, int, int]]:
    """(time, blob, width, height) for every frame showing the object."""
    out = []
    for f, t in zip(frames, times):
        b = find_blob(f)
        if b is not None:
            out.append((float(t), b, f.shape[1], f.shape[0]))
    return out


def solve_direction(sample, frames: np.ndarray, times: np.ndarray) -> str | None:
    """The option whose motion vector best matches the object's fitted velocity."""
    texts = option_texts(sample.options)
    if not all(t in DIRECTIONS for t in texts):
        return None
    track = _track(frames, times)
    if len(track) < 2:
        return None
    t = np.array([p[0] for p in track])
    x = np.array([p[1].cx / p[2] for p in track])
    y = np.array([p[1].cy / p[3] for p in track])
    vx, vy = np.polyfit(t, x, 1)[0], np.polyfit(t, y, 1)[0]
    if math.hypot(vx, vy) < 0.05:  # less than 5 % of the frame per second: no clear motion
        return None
    best = max(texts, key=lambda k: DIRECTIONS[k][0] * vx + DIRECTIONS[k][1] * vy)
    return "ABCDEFGH"[texts.index(best)]


def crossing_speeds(frames: np.ndarray, times: np.ndarray) -> list[tuple[float, float]]:
    """(speed in frame widths per second, ball diameter in frame widths) of each crossing seen.

    Visible frames split into crossings at a frame without the ball or a gap over SEGMENT_GAP_S.
    Speed is the least-squares slope of the centre over frames where the ball is whole (falling
    back to all its frames); the diameter is the ball's height, which clipping at the side edges
    does not change.
    """
    segments: list[list[tuple[float, Blob, int, int]]] = []
    current: list[tuple[float, Blob, int, int]] = []
    for f, t in zip(frames, times):
        b = find_blob(f)
        if b is None or (current and t - current[-1][0] > SEGMENT_GAP_S):
            if len(current) >= 2:
                segments.append(current)
            current = []
        if b is not None:
            current.append((float(t), b, f.shape[1], f.shape[0]))
    if len(current) >= 2:
        segments.append(current)
    out = []
    for seg in segments:
        whole = [p for p in seg if not p[1].touches_edge]
        use = whole if len(whole) >= 2 else seg
        t = np.array([p[0] for p in use])
        x = np.array([p[1].cx / p[2] for p in use])
        speed = abs(float(np.polyfit(t, x, 1)[0]))
        diameter = float(np.median([(p[1].y1 - p[1].y0 + 1) / p[2] for p in seg]))
        out.append((speed, diameter))
    return out


def solve_speed(sample, frames: np.ndarray, times: np.ndarray) -> str | None:
    """Which crossing is at the original speed and how the other was changed.

    At the original speed a crossing covers (1 + diameter) frame widths in T0 seconds (T0 is
    stated in the question, `metadata["task"]["original_crossing_seconds"]`). Each crossing's
    speed ratio is rounded in log base 3 to 1/3, 1 or 3.
    """
    t0 = (sample.metadata.get("task") or {}).get("original_crossing_seconds")
    texts = option_texts(sample.options)
    if not t0 or len(texts) != len(SPEED_OPTIONS):
        return None
    crossings = crossing_speeds(frames, times)
    if len(crossings) != 2:
        return None
    classes = []
    for speed, diameter in crossings:
        ratio = speed / ((1.0 + diameter) / float(t0))
        classes.append(int(np.clip(round(math.log(max(ratio, 1e-6), 3)), -1, 1)))
    if sorted(abs(c) for c in classes) != [0, 1]:
        return None
    original = classes.index(0)
    factor = 3.0 if classes[1 - original] > 0 else 1.0 / 3.0
    wanted = next(text for orig, f, text in SPEED_OPTIONS if orig == original and f == factor)
    return "ABCDEFGH"[texts.index(wanted)] if wanted in texts else None


SOLVERS: dict[str, Callable[..., str | None]] = {
    "flash_shape": solve_flash_shape,
    "flash_colour": solve_flash_shape,
    "count_flashes": solve_count_flashes,
    "event_order": solve_event_order,
    "direction": solve_direction,
    "speed": solve_speed,
}


def perceive(sample, frames: np.ndarray, timestamps: Sequence[float]) -> str | None:
    """Answer a synthetic sample from the given frames, or None if they do not show enough.

    `sample` needs `question`, `options` and `metadata["task_kind"]` (a `VideoSample` fits);
    `frames` is uint8 (n, H, W, 3) RGB, `timestamps` the n times in seconds, in any order.
    Samples of an unknown kind get None.
    """
    kind = (getattr(sample, "metadata", None) or {}).get("task_kind")
    solver = SOLVERS.get(kind)
    frames = np.asarray(frames)
    if solver is None or frames.ndim != 4 or len(frames) == 0 or len(frames) != len(timestamps):
        return None
    frames, times = _sorted(frames, timestamps)
    return solver(sample, frames, times)
