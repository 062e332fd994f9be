"""Grounded-thinking reward of Open-o3-Video (seed 003: "the thinking score checks how retrieved
moments and objects support the reasoning"; v1's thinking reward, kept in v2's joint objective).

The thinking cites moments as `<t>12.5</t>` and objects as
`<obj>name</obj><box>[x1,y1,x2,y2]</box>at<t>12.5</t>s`. Against the annotated key frames
(`{time, boxes: {object: [x1,y1,x2,y2]}}`, boxes normalised to [0, 1]):

- temporal term: each cited time scores exp(−Δt² / 2σ²), Δt its distance to the nearest key
  frame; the term is the mean over cited times;
- spatial term: each cited box scores IoU with the box of the same object at the key frame
  nearest its cited time, but only when that key frame lies within `time_gate` seconds
  (a box at the wrong moment earns nothing); the term is the mean over cited boxes;
- r_think = w_t·temporal + w_s·spatial (0 with nothing cited or no key frames; the temporal term
  alone when no key frame annotates a box).

Choices where the seeds are silent: Open-o3-Video anneals σ during training, here σ is a
parameter (default 2 s); equal weights 0.5/0.5; object names match case-insensitively after
trimming, and a box is compared only with a key frame that annotates that object; boxes with a
coordinate above 1 are read as pixels when `image_size=(width, height)` is given, else score 0.

>>> kf = [{"time": 10.0, "boxes": {"dog": [0.1, 0.1, 0.5, 0.5]}}]
>>> grounding_reward("<obj>dog</obj><box>[0.1,0.1,0.5,0.5]</box>at<t>10</t>s", kf)
1.0
>>> round(grounding_reward("at <t>12</t> the dog sits", kf), 4)   # time only: 0.5·exp(-4/8)
0.3033
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

_NUM = r"[-+]?\d+(?:\.\d+)?"
# No two `\s*` meet (each optional "[", "]", "at" carries its own): adjacent `\s*` runs, and a
# lazy name between two of them, match the same texts but backtrack quadratically or worse on a
# long run of spaces. The name is stripped by `parse_citations`.
_OBJECT_CITE = re.compile(
    rf"<obj>(?P<name>[^<]*)</obj>\s*<box>\s*(?:\[\s*)?(?P<box>{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM})\s*(?:\]\s*)?</box>"
    rf"\s*(?:at\s*)?<t>\s*(?P<t>{_NUM})\s*</t>",
    re.IGNORECASE,
)
_TIME_CITE = re.compile(rf"<t>\s*({_NUM})\s*</t>")


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """IoU of two [x1, y1, x2, y2] boxes (0 for degenerate boxes).

    >>> box_iou([0, 0, 2, 2], [1, 1, 3, 3])
    0.14285714285714285
    """
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    area_a = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])
    area_b = max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])
    union = area_a + area_b - inter
    return inter / union if union > 0 else 0.0


def region_iou(time: float, box: Sequence[float], key_frames: Sequence[Any], time_gate: float = 2.0) -> float | None:
    """Best IoU of a region `box` at `time` with the boxes of the key frames within `time_gate` seconds.

    The spatial half of grounded thinking (`grounding_reward`), applied to a region the agent
    looked at (`zoom`) instead of one it wrote: 0 when no key frame lies within the gate, None when
    the sample has no boxes at all (nothing to ground against).

    >>> region_iou(3.0, [0.2, 0.2, 0.4, 0.4], [{"time": 3.5, "boxes": {"label": [0.2, 0.2, 0.4, 0.4]}}])
    1.0
    """
    frames = [(float(_field(k, "time")), list((_field(k, "boxes") or {}).values())) for k in key_frames]
    if not any(boxes for _, boxes in frames):
        return None
    return max((box_iou(box, truth) for t, boxes in frames if abs(t - time) <= time_gate for truth in boxes), default=0.0)


def parse_citations(thinking: str) -> tuple[list[float], list[tuple[str, list[float], float]]]:
    """(cited times, cited (object, box, time) triples) in a thinking text.

    >>> parse_citations("<obj>Cup</obj><box>[0.2, 0.3, 0.4, 0.5]</box> at <t>3.5</t>s, later <t>9</t>")
    ([3.5, 9.0], [('cup', [0.2, 0.3, 0.4, 0.5], 3.5)])
    """
    times = [float(t) for t in _TIME_CITE.findall(thinking)]
    objects = []
    for m in _OBJECT_CITE.finditer(thinking):
        box = [float(v) for v in m.group("box").split(",")]
        objects.append((m.group("name").strip().lower(), box, float(m.group("t"))))
    return [t for t in times if math.isfinite(t)], objects


def _normalise_box(box: list[float], image_size: tuple[int, int] | None) -> list[float] | None:
    if all(0.0 <= v <= 1.0 for v in box):
        return box
    if image_size is None:
        return None
    w, h = image_size
    return [box[0] / w, box[1] / h, box[2] / w, box[3] / h]


def grounding_reward(
    thinking: str,
    key_frames: Sequence[Any],
    sigma: float = 2.0,
    time_gate: float = 2.0,
    temporal_weight: float = 0.5,
    spatial_weight: float = 0.5,
    image_size: tuple[int, int] | None = None,
    return_breakdown: bool = False,
) -> float | tuple[float, dict]:
    """Grounded-thinking reward in [0, 1] of a thinking text against annotated key frames.

    `key_frames` items have `time` and `boxes` (attributes, like `videoseek.envs.KeyFrame`, or keys).
    """
    times, objects = parse_citations(thinking)
    frames = [(float(_field(k, "time")), {str(n).strip().lower(): b for n, b in (_field(k, "boxes") or {}).items()}) for k in key_frames]
    if not frames or (not times and not objects):
        empty = {"temporal": 0.0, "spatial": 0.0, "cited_times": len(times), "cited_boxes": len(objects)}
        return (0.0, empty) if return_breakdown else 0.0
    key_times = [t for t, _ in frames]
    temporal_scores = [math.exp(-min((t - k) ** 2 for k in key_times) / (2 * sigma**2)) for t in times]
    spatial_scores = []
    for name, box, t in objects:
        box = _normalise_box(box, image_size)
        candidates = [(abs(t - kt), boxes[name]) for kt, boxes in frames if name in boxes]
        if box is None or not candidates:
            spatial_scores.append(0.0)
            continue
        distance, truth = min(candidates, key=lambda c: c[0])
        spatial_scores.append(box_iou(box, truth) if distance <= time_gate else 0.0)
    temporal = sum(temporal_scores) / len(temporal_scores) if temporal_scores else 0.0
    spatial = sum(spatial_scores) / len(spatial_scores) if spatial_scores else 0.0
    if any(boxes for _, boxes in frames):
        reward = temporal_weight * temporal + spatial_weight * spatial
    else:  # nothing to ground objects against: the temporal term is the whole reward
        reward = temporal
    if not return_breakdown:
        return reward
    return reward, {"temporal": temporal, "spatial": spatial, "cited_times": len(times), "cited_boxes": len(objects)}
