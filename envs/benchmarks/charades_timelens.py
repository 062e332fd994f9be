"""Charades-TimeLens (TimeLens-Bench's re-annotated Charades-STA) -> `VideoSample` rows.

TimeLens-Bench (github.com/TencentARC/TimeLens, commit 5d90c067246ddb11db3203adbb0085bdc48d9e5e)
publishes ``charades-timelens.json`` as one JSON object keyed by video id:
``{vid: {"duration": D, "spans": [[s, e], ...], "queries": [q, ...]}}``; the k-th query goes with
the k-th span. ``timelens/dataset/timelens_data.py`` (``load_annos``) reads it the same way: one
query per (span, query) pair, the video ``{vid}.mp4`` under ``videos/charades/``, and the query
cleaned by ``parse_query`` (whitespace runs made one space, trailing periods stripped).

A sample's id is ``{vid}#{k}``; the question is TimeLens's ``GROUNDER_PROMPT``
(``evaluation/utils.py``) around the cleaned query; the answer ``[s, e]`` (``temporal_grounding``),
the clue interval ``[s, e]`` when ``e > s``. ``metadata.benchmark`` keeps vid, the query as written
and cleaned, the span and the duration: `videoseek.agents.benchmarks.charades_timelens` scores
against it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from videoseek.envs.convert import ConvertOptions, RowError, _build, resolve_video
from videoseek.envs.sample import DataError, VideoSample

NAME = "charades-timelens"
VIDEO_EXTENSION = ".mp4"
# TimeLens evaluation/utils.py GROUNDER_PROMPT (the prompt of its Qwen-VL evaluation).
GROUNDER_PROMPT = (
    "Please find the visual event described by the sentence '{}', determining its starting and ending times. "
    "The format should be: 'The event happens in <start time> - <end time> seconds'."
)

FIELDS = {
    "key (vid)": "video '{vid}.mp4' under --video-root; id '{vid}#{k}' (k-th query of the video)",
    "queries[k]": "question: TimeLens's GROUNDER_PROMPT around parse_query(query)",
    "spans[k]": "answer '[s, e]' (temporal_grounding), clue_intervals [[s, e]]",
    "duration": "duration (seconds)",
    "everything": "metadata.benchmark {name, vid, query, query_raw, span, duration}: what the metrics score against",
}


def parse_query(query: str) -> str:
    """TimeLens's ``parse_query``: whitespace runs made one space, trailing periods stripped.

    >>> parse_query("  person  opens the door.. ")
    'person opens the door'
    """
    return re.sub(r"\s+", " ", query).strip().strip(".").strip()


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """One record per query of a TimeLens-Bench file: ``{vid, duration, span, query, __k__}``,
    located ``FILE: video VID, query K``; a video entry that is not ``{duration, spans, queries}``
    with as many spans as queries is yielded once as a `RowError`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: input file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected TimeLens-Bench's object {{vid: {{duration, spans, queries}}}}, got a {type(data).__name__}")
    for vid, entry in data.items():
        where = f"{path}: video {vid}"
        if not isinstance(entry, dict):
            yield where, RowError("entry", f"expected {{duration, spans, queries}}, got {type(entry).__name__}")
            continue
        spans, queries = entry.get("spans"), entry.get("queries")
        for field, value in (("spans", spans), ("queries", queries)):
            if not isinstance(value, list):
                yield where, RowError(field, f"expected a list, got {value!r:.60}")
                break
        else:
            if len(spans) != len(queries):
                yield where, RowError("spans", f"{len(spans)} spans for {len(queries)} queries")
                continue
            for k, (span, query) in enumerate(zip(spans, queries)):
                yield f"{where}, query {k}", {"vid": vid, "duration": entry.get("duration"), "span": span, "query": query, "__k__": k}


def _span(value: Any) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise RowError("spans", f"expected [start, end] in seconds, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise RowError("spans", f"expected seconds >= 0, got {v!r}")
        out.append(float(v))
    return out[0], out[1]


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Charades-TimeLens query -> `VideoSample` (mapping: `FIELDS`)."""
    vid = record.get("vid")
    if not isinstance(vid, str) or not vid.strip():
        raise RowError("vid", "missing or empty video id")
    query = record.get("query")
    if not isinstance(query, str) or not parse_query(query):
        raise RowError("queries", "missing or empty query")
    s, e = _span(record.get("span"))
    duration = record.get("duration")
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not math.isfinite(duration) or duration <= 0:
        raise RowError("duration", f"expected positive seconds, got {duration!r}")
    duration = float(duration)
    k = int(record.get("__k__", 0))
    benchmark = {"name": NAME, "vid": vid, "query": parse_query(query), "query_raw": query, "span": [s, e], "duration": duration}
    row = {
        "id": f"{vid}#{k}",
        "video": resolve_video(vid + VIDEO_EXTENSION, root),
        "question": GROUNDER_PROMPT.format(parse_query(query)),
        "options": None,
        "answer": json.dumps([s, e]),
        "problem_type": "temporal_grounding",
        # a span past the stated length (annotation rounding) leaves the length to check-data
        "duration": duration if max(s, e) <= duration + 0.05 else None,
        "clue_intervals": [(s, e)] if e > s else [],
        "data_source": NAME,
        "metadata": {"task_kind": "charades_timelens", "benchmark": benchmark, "converted_from": f"{NAME}:{location}"},
    }
    return _build(row)
