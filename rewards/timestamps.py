"""Timestamps in model text: anchored parsing, spans, and VideoMend's timestamp reward r_ts.

VideoMend (seed 002, §6.2 "时间戳奖励 r_ts"): three physical checks on the timestamps that a
Ref-Delta chain of thought cites in `<time>…</time>` and `<time_range>… - …</time_range>`:
parseable, monotonically non-decreasing, within the video duration. The seed names the checks but
not how they combine; here each check is the fraction of items that pass it and r_ts is their
weighted mean (equal weights by default), so one bad timestamp costs a little, not everything.

Time strings: "HH:MM:SS(.s)", "MM:SS(.s)" and plain seconds ("12.5", "12.5s"). The patterns are
anchored on both sides, so "MM:SS" never matches inside "HH:MM:SS" and "1:30" never matches
inside "01:30:45".

>>> parse_time("00:01:05.5")
65.5
>>> find_times("from 00:00:12.9 to 00:01:05")
[12.9, 65.0]
>>> timestamp_reward("<time>00:00:01</time> <time_range>00:00:01 - 00:00:04</time_range>", duration=10)
1.0
"""

from __future__ import annotations

import math
import numbers
import re
from decimal import Decimal
from typing import Any

import numpy as np

from .tags import tag_contents

# A colon time: optional hours, minutes (1-2 digits), seconds (2 digits, optional fraction).
# The look-arounds forbid a digit, colon or dot-digit on either side, which is what anchors it.
_COLON_TIME = r"(?:\d+:)?\d{1,2}:\d{2}(?:\.\d+)?"
_SECONDS = r"\d+(?:\.\d+)?(?:\s*(?:s|sec|secs|second|seconds)\b)?"
_LEFT = r"(?<![\w:.])"
_RIGHT = r"(?![\w:]|\.\d)"
TIME_PATTERN = re.compile(rf"{_LEFT}(?:{_COLON_TIME}|{_SECONDS}){_RIGHT}")
COLON_TIME_PATTERN = re.compile(rf"{_LEFT}{_COLON_TIME}{_RIGHT}")
_FULL_COLON = re.compile(r"^\s*(?:(\d+):)?(\d{1,2}):(\d{2}(?:\.\d+)?)\s*$")
# The unit carries its trailing `\s*`: "\s*(?:s|…)?\s*$" matches the same strings but backtracks
# quadratically on a long run of spaces.
_FULL_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:(?:s|sec|secs|second|seconds)\s*)?$")
_MAX_TIME_CHARS = 64  # no time is longer; a cap on what the patterns ever scan

# A span: "from A to B", "A to B", "A - B", "[A, B]", "(A, B)" with A and B time strings.
_T = rf"{_LEFT}(?:{_COLON_TIME}|{_SECONDS}){_RIGHT}"
SPAN_PATTERN = re.compile(
    rf"(?P<a>{_T})\s*(?:,|-|–|—|~|to|until|and)\s*(?P<b>{_T})",
    re.IGNORECASE,
)

_TAG_PAIRS = (("<time>", "</time>"), ("<time_range>", "</time_range>"))
# The separator of a range's start and end. `(?<!\s)`: a split never starts inside a run of white
# space (one starting at the run's first character would match too), so a long run is scanned once.
_RANGE_SEPARATOR = re.compile(r"(?<!\s)\s*(?:-|–|—|~|to)\s*(?=\d)")


def parse_time(value: Any) -> float | None:
    """Seconds of one time value; None when it is no time or not finite.

    The one time parser: model text (the timestamp reward, `find_times`, `parse_span`), tool-call
    arguments (`videoseek.envs.actions` re-exports it) and dataset fields (`convert`) all read times
    with it, so a call, a cited time and an annotation mean the same thing.

    - a number: any real type (int, float, numpy scalars or 0-d arrays, Decimal, Fraction; not
      bool); one too large for a float (10**400) is not finite;
    - a string: "HH:MM:SS.s", "MM:SS", "12.5", "12.5s" (surrounding white space ignored). Minutes
      and seconds of a colon form must be below 60 (an impossible clock time is unparseable). A
      string longer than 64 characters once stripped is no time (length cap).

    >>> parse_time("1:30"), parse_time("12.5 s"), parse_time("1:75"), parse_time("soon")
    (90.0, 12.5, None, None)
    >>> parse_time("01:02:03.5"), parse_time("2:05"), parse_time("7s"), parse_time("nan")
    (3723.5, 125.0, 7.0, None)
    >>> parse_time(np.float32(2.5)), parse_time(np.int64(3)), parse_time(10**400), parse_time(None), parse_time(True)
    (2.5, 3.0, None, None, None)
    """
    if isinstance(value, (np.generic, np.ndarray)):
        if getattr(value, "ndim", 0) != 0:
            return None
        value = value.item()  # the Python scalar: np.float32 -> float, np.str_ -> str, np.bool_ -> bool
    if isinstance(value, bool):
        return None
    if isinstance(value, (numbers.Real, Decimal)):  # Decimal is no numbers.Real
        try:
            number = float(value)
        except (OverflowError, ValueError, TypeError):
            return None
        return number if math.isfinite(number) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) > _MAX_TIME_CHARS:
        return None
    m = _FULL_COLON.match(text)
    if m:
        hours = float(m.group(1)) if m.group(1) is not None else 0.0
        minutes, seconds = float(m.group(2)), float(m.group(3))
        if (m.group(1) is not None and minutes >= 60) or seconds >= 60:
            return None
        number = hours * 3600 + minutes * 60 + seconds
        return number if math.isfinite(number) else None
    m = _FULL_SECONDS.match(text)
    if m:
        number = float(m.group(1))
        return number if math.isfinite(number) else None
    return None


def find_times(text: str, colon_only: bool = False) -> list[float]:
    """All parseable times in `text`, in order (anchored: no partial matches inside longer times)."""
    pattern = COLON_TIME_PATTERN if colon_only else TIME_PATTERN
    out = []
    for m in pattern.finditer(text):
        t = parse_time(m.group(0))
        if t is not None:
            out.append(t)
    return out


def parse_span(text: str) -> tuple[float, float] | None:
    """The first "start … end" span in a model's free text, as seconds; None when there is none.

    For model replies (temporal-grounding answers, cited ranges): it searches the text and never
    raises. A dataset field that must hold a span is read by
    `videoseek.envs.source_records.span_field` instead, which is strict (0 <= start < end) and
    names the field at fault.

    >>> parse_span("The event happens from 3.5 to 7 seconds.")
    (3.5, 7.0)
    >>> parse_span("[00:10, 00:20]")
    (10.0, 20.0)
    """
    for m in SPAN_PATTERN.finditer(text):
        a, b = parse_time(m.group("a")), parse_time(m.group("b"))
        if a is not None and b is not None:
            return (a, b)
    return None


def _tagged_items(text: str) -> list[tuple[str, ...]]:
    """Raw strings of each `<time>` (1 item) and `<time_range>` (2 items: start, end), in order.

    Linear in the length of `text` (`tag_contents` rather than a lazy regex alternation, which
    retries every unclosed tag to the end of the text).
    """
    items: list[tuple[str, ...]] = []
    for kind, content in tag_contents(text, *_TAG_PAIRS):
        if kind == 0:
            items.append((content,))
        else:
            parts = _RANGE_SEPARATOR.split(content.strip(), maxsplit=1)
            items.append(tuple(parts) if len(parts) == 2 else (content, ""))
    return items


def timestamp_checks(text: str, duration: float) -> dict[str, float]:
    """Fractions passing each VideoMend check: `parseable`, `monotonic`, `within`, and `count`.

    Items are the strings inside `<time>` and `<time_range>` tags (a range contributes its start
    and end); when there is no tag, the colon-format times of the free text are the items.
    `monotonic` is the fraction of consecutive parsed times (in text order) that do not go back;
    `within` the fraction of parsed times in [0, duration]. With no item all are 0.

    >>> timestamp_checks("<time>00:00:05</time> <time>00:00:03</time> <time>9:99</time>", 4)
    {'parseable': 0.6666666666666666, 'monotonic': 0.0, 'within': 0.5, 'count': 3.0}
    """
    raw = [s for item in _tagged_items(text) for s in item]
    if raw:
        times = [parse_time(s) for s in raw]
    else:
        times = find_times(text, colon_only=True)
    if not times:
        return {"parseable": 0.0, "monotonic": 0.0, "within": 0.0, "count": 0.0}
    parsed = [t for t in times if t is not None]
    parseable = len(parsed) / len(times)
    if len(parsed) >= 2:
        monotonic = sum(b >= a for a, b in zip(parsed, parsed[1:])) / (len(parsed) - 1)
    else:
        monotonic = 1.0 if parsed else 0.0
    within = sum(0.0 <= t <= duration for t in parsed) / len(parsed) if parsed else 0.0
    return {"parseable": parseable, "monotonic": monotonic, "within": within, "count": float(len(times))}


def timestamp_reward(
    text: str,
    duration: float,
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3),
) -> float:
    """VideoMend r_ts in [0, 1]: weighted mean of the parseable / monotonic / within fractions.

    `weights` (parseable, monotonic, within) are not given in the seed; equal thirds by default.

    >>> round(timestamp_reward("<time>00:00:02</time> <time_range>00:00:02 - 00:00:30</time_range>", 10), 4)
    0.8889
    >>> timestamp_reward("no times at all", 10)
    0.0
    """
    checks = timestamp_checks(text, duration)
    total = sum(weights)
    if checks["count"] == 0 or total <= 0:
        return 0.0
    score = (weights[0] * checks["parseable"] + weights[1] * checks["monotonic"] + weights[2] * checks["within"]) / total
    return min(1.0, max(0.0, score))
