"""Closed time intervals in seconds: union, intersection, temporal IoU.

The evidence state of CS-GRPO (Open-o3-Video-v2, seed 003) is defined on unions of intervals;
these functions are the shared algebra for `videoseek.envs.EvidenceState` and
`videoseek.rewards.clue_seek_reward`, so both compute the same numbers.

>>> union([(0, 2), (1, 3), (5, 6)])
[(0.0, 3.0), (5.0, 6.0)]
>>> measure([(0, 2), (1, 3)])
3.0
>>> round(tiou([(0, 4)], [(2, 6)]), 4)
0.3333
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Interval = tuple[float, float]


def union(intervals: Iterable[Sequence[float]]) -> list[Interval]:
    """Sorted, disjoint union of closed intervals; empty or inverted intervals are dropped.

    Touching intervals ([0, 1] and [1, 2]) merge, since closed intervals share the endpoint.
    """
    spans = sorted((float(s), float(e)) for s, e in intervals if float(e) > float(s))
    merged: list[Interval] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def measure(intervals: Iterable[Sequence[float]]) -> float:
    """Total length of the union of `intervals` in seconds."""
    return sum(e - s for s, e in union(intervals))


def intersection(a: Iterable[Sequence[float]], b: Iterable[Sequence[float]]) -> list[Interval]:
    """Union of `a` intersected with union of `b`, as sorted disjoint intervals (two-pointer sweep)."""
    ua, ub = union(a), union(b)
    out: list[Interval] = []
    i = j = 0
    while i < len(ua) and j < len(ub):
        s = max(ua[i][0], ub[j][0])
        e = min(ua[i][1], ub[j][1])
        if e > s:
            out.append((s, e))
        if ua[i][1] < ub[j][1]:
            i += 1
        else:
            j += 1
    return out


def tiou(a: Iterable[Sequence[float]], b: Iterable[Sequence[float]]) -> float:
    """Temporal IoU of two interval sets: |A∩B| / |A∪B| (0 when both are empty)."""
    a, b = list(a), list(b)
    inter = measure(intersection(a, b))
    total = measure(a + b)
    return inter / total if total > 0 else 0.0


def clip(interval: Sequence[float], lo: float, hi: float) -> Interval | None:
    """Clip one interval to [lo, hi]; None when nothing of positive length is left."""
    s, e = max(float(interval[0]), lo), min(float(interval[1]), hi)
    return (s, e) if e > s else None
