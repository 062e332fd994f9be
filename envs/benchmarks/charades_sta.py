"""Charades-STA (Gao et al. 2017, TALL) -> `VideoSample` rows.

Two published forms of the same annotations are read:

- TALL's text files ``charades_sta_train.txt`` / ``charades_sta_test.txt`` (github.com/jiyanggao/TALL),
  one query a line: ``VID START END##sentence`` (``3MSZA 24.3 30.4##person turn a light on.``);
- the records of lmms-eval's ``lmms-lab/charades_sta`` (JSON, JSONL or parquet): ``video``
  (``3MSZA.mp4``), ``caption``, ``timestamp`` ([s, e], or its text), and ``duration`` when present.

Charades-STA has no query ids: a sample's id is ``{vid}#{k}``, the k-th query (from 0) of that video
in the file. The question is the caption wrapped in lmms-eval's prompt (``charades.yaml``:
``pre_prompt + caption + ". " + post_prompt``); the answer is ``[s, e]`` (``temporal_grounding``),
the clue interval ``[s, e]``. The annotation as written (vid, caption, timestamp, and the line)
stays in ``metadata.benchmark``: `videoseek.agents.benchmarks.charades_sta` scores against it, so a
moment the schema cannot hold as a clue interval (end <= start, a handful in the source files) is
kept as a sample with no clue interval instead of being dropped from the benchmark.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from videoseek.envs.convert import ConvertOptions, RowError, _build, _jsonable, iter_records, resolve_video
from videoseek.envs.sample import DataError, VideoSample

NAME = "charades-sta"
VIDEO_EXTENSION = ".mp4"  # Charades_v1_480/{vid}.mp4, the layout lmms-eval reads
# lmms-eval's prompt (lmms_eval/tasks/charades_sta/charades.yaml, lmms_eval_specific_kwargs.default).
PRE_PROMPT = (
    "Please find the visual event described by a sentence in the video, determining its starting and ending times. "
    "The format should be: 'The event happens in the start time - end time'. For example, The event 'person turn a "
    "light on' happens in the 24.3 - 30.4 seonds. Now I will give you the textual sentence: "
)
POST_PROMPT = "Please return its start time and end time."

FIELDS = {
    "VID (txt) | video (records)": "video '{vid}.mp4' under --video-root; id '{vid}#{k}' (k-th query of the video)",
    "START END (txt) | timestamp (records)": "answer '[s, e]' (temporal_grounding), clue_intervals [[s, e]]",
    "sentence (txt, after '##') | caption (records)": "question: lmms-eval's pre_prompt + caption + '. ' + post_prompt",
    "duration (records)": "duration (when present and every moment fits in it)",
    "everything": "metadata.benchmark {name, vid, caption, timestamp, ...}: what the metrics score against",
}

_LINE = re.compile(r"^\s*(?P<vid>\S+)\s+(?P<s>\S+)\s+(?P<e>\S+)\s*##(?P<caption>.*)$")


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """Records of a Charades-STA file: TALL's ``.txt`` lines parsed into {vid, timestamp, caption},
    or the records of a JSON, JSONL or parquet file; each with ``__k__``, its query number within
    its video."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: input file not found")
    per_video: Counter = Counter()
    if path.suffix.lower() == ".txt":
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                m = _LINE.match(line.rstrip("\r\n"))
                if not m:
                    yield f"{path}:{lineno}", RowError("line", f"expected 'VID START END##sentence', got {line.strip()[:80]!r}")
                    continue
                vid = m.group("vid")
                yield f"{path}:{lineno}", {"vid": vid, "timestamp": [m.group("s"), m.group("e")],
                                           "caption": m.group("caption").strip(), "__k__": per_video[vid]}
                per_video[vid] += 1
        return
    for location, record in iter_records(path):
        if isinstance(record, dict):
            vid = _vid(record)
            if vid is not None:
                record = {**record, "__k__": per_video[vid]}
                per_video[vid] += 1
        yield location, record


def _vid(record: dict) -> str | None:
    raw = record.get("vid", record.get("video"))
    if not isinstance(raw, str) or not raw.strip():
        return None
    name = raw.strip().replace("\\", "/").rsplit("/", 1)[-1]
    return name[: -len(VIDEO_EXTENSION)] if name.lower().endswith(VIDEO_EXTENSION) else name


def _moment(value: Any) -> tuple[float, float]:
    """[s, e] from a list of numbers or number texts, or the text of a list ("[24.3, 30.4]")."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise RowError("timestamp", f"unparseable moment {value!r}") from None
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise RowError("timestamp", f"expected [start, end] in seconds, got {value!r}")
    out = []
    for v in value:
        try:
            t = float(v)
        except (TypeError, ValueError):
            raise RowError("timestamp", f"not a number: {v!r}") from None
        if isinstance(v, bool) or not math.isfinite(t) or t < 0:
            raise RowError("timestamp", f"expected seconds >= 0, got {v!r}")
        out.append(t)
    return out[0], out[1]


def question_text(caption: str) -> str:
    """lmms-eval's Charades-STA prompt (utils.py temporal_grounding_doc_to_text)."""
    return f"{PRE_PROMPT}{caption}. {POST_PROMPT}"


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Charades-STA query -> `VideoSample` (mapping: `FIELDS`)."""
    vid = _vid(record)
    if vid is None:
        raise RowError("vid" if "vid" in record else "video", "missing or empty video id")
    caption = record.get("caption", record.get("sentence", record.get("query")))
    if not isinstance(caption, str) or not caption.strip():
        raise RowError("caption", "missing or empty")
    if "timestamp" not in record and "timestamps" not in record:
        raise RowError("timestamp", "missing")
    raw_ts = record.get("timestamp", record.get("timestamps"))
    s, e = _moment(raw_ts)
    duration = record.get("duration")
    if duration is not None:
        try:
            duration = float(duration)
        except (TypeError, ValueError):
            raise RowError("duration", f"expected seconds, got {duration!r}") from None
        if not math.isfinite(duration) or duration <= 0:
            raise RowError("duration", f"expected positive seconds, got {record.get('duration')!r}")
        if max(s, e) > duration + 0.05:
            duration = None  # the moment overshoots the stated length (it happens): leave it to check-data
    k = int(record.get("__k__", 0))
    source = {key: _jsonable(v) for key, v in record.items() if key != "__k__"}
    benchmark = {**source, "name": NAME, "vid": vid, "caption": caption.strip(), "timestamp": [s, e]}
    row = {
        "id": f"{vid}#{k}",
        "video": resolve_video(vid + VIDEO_EXTENSION, root),
        "question": question_text(caption.strip()),
        "options": None,
        "answer": json.dumps([s, e]),
        "problem_type": "temporal_grounding",
        "duration": duration,
        "clue_intervals": [(s, e)] if e > s else [],
        "data_source": NAME,
        "metadata": {"task_kind": "charades_sta", "benchmark": benchmark, "converted_from": f"{NAME}:{location}"},
    }
    return _build(row)
