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
and cleaned, the span and the duration: `videoseek.envs.benchmarks.charades_timelens` scores
against it.

Official metric. Charades-TimeLens metrics as TimeLens computes them: R1@0.3, R1@0.5, R1@0.7 and mIoU, in percent.

Official script: ``evaluation/compute_metrics.py`` of github.com/TencentARC/TimeLens (commit
5d90c067246ddb11db3203adbb0085bdc48d9e5e), with ``extract_time`` and ``iou`` of
``timelens/utils.py``. Its README prescribes, for a model outside its codebase, a results file of
raw answers (``{"vid.mp4>>>query>>>[s, e]": {"answers": text}}``): the script then reads each
answer with ``extract_time`` and scores the first pair. That is ``protocol="raw"``, the default and
what ``videoseek eval --benchmark charades-timelens`` computes.

TimeLens's own inference script (``evaluation/eval_dataloader.py``) stores ``timestamps`` instead:
``extract_time``'s pairs rounded to whole seconds (Python's ``round``, the dataset's ``UNIT`` 1.0),
and ``[duration + 10, duration + 20]`` for an answer with none; ``compute_metrics.py`` then scores
those. That is ``protocol="timelens-inference"`` (Python API only). Both give IoU 0 to an
unreadable answer; they differ on answers whose times are not whole seconds.

lmms-eval's Charades-STA scorer (`videoseek.envs.benchmarks.charades_sta`) reads answers
differently (sentence filtering, "to" made "-", reversed moments swapped): a paper's
"Charades-TimeLens" column is this module's number, its "Charades-STA" column that one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._scoring import benchmark_answers, moment_retrieval_table, recall_and_miou
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, build_sample, resolve_video
from videoseek.envs.trajectory import Trajectory

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
    return build_sample(row)


# The official metric: scoring a run's trajectories as the benchmark's own script does.

THRESHOLDS = (0.3, 0.5, 0.7)
PROTOCOLS = ("raw", "timelens-inference")
SCRIPT = "TencentARC/TimeLens evaluation/compute_metrics.py + timelens/utils.py extract_time @ 5d90c06"
UNPARSEABLE = (-100.0, -100.0)  # compute_metrics.py's moment for an answer extract_time cannot read

_CLOCK = re.compile(r"\b(\d{1,2}:\d{2}:\d{2}(?:\.\d+)?|\d{1,2}:\d{2}(?:\.\d+)?)\b")
_RANGES = (re.compile(r"(\d+\.?\d*)\s*-\s*(\d+\.?\d*)"), re.compile(r"(\d+\.?\d*)\s+to\s+(\d+\.?\d*)"))
_NUMBER = re.compile(r"\b(\d+\.\d+|\d+)\b")


def _clock_seconds(text: str) -> float:
    parts = text.split(":")
    if len(parts) == 3:
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    return int(parts[0]) * 60 + float(parts[1])


def extract_time(text: str) -> list[tuple[float, float]]:
    """Every (start, end) pair TimeLens's ``extract_time`` reads from a model's answer.

    Lower-cased, the first rule that finds something wins: clock times (``HH:MM:SS[.f]`` or
    ``MM:SS[.f]``), an even number of them, paired in order; else every ``a - b``, else every
    ``a to b``; else all numbers, an even number of them, paired in order. Pairs are kept as read
    (a reversed pair is not swapped).

    >>> extract_time("The event happens in 24.3 - 30.4 seconds.")
    [(24.3, 30.4)]
    >>> extract_time("It starts at 00:12 and ends at 00:01:05.5")
    [(12.0, 65.5)]
    >>> extract_time("Start: 9 seconds. End: 2 seconds.")
    [(9.0, 2.0)]
    >>> extract_time("no idea")
    []
    """
    paragraph = text.lower()
    clocks = _CLOCK.findall(paragraph)
    clocks = [_clock_seconds(t) for t in clocks[: len(clocks) // 2 * 2]]
    pairs = [(clocks[i], clocks[i + 1]) for i in range(0, len(clocks), 2)]
    if not pairs:
        for pattern in _RANGES:
            found = pattern.findall(paragraph)
            if found:
                pairs = [(float(a), float(b)) for a, b in found]
                break
    if not pairs:
        numbers = _NUMBER.findall(paragraph)
        numbers = [float(n) for n in numbers[: len(numbers) // 2 * 2]]
        pairs = [(numbers[i], numbers[i + 1]) for i in range(0, len(numbers), 2)]
    return pairs


def moment_iou(gt: Sequence[float], pred: Sequence[float]) -> float:
    """TimeLens's ``iou(gt, pred)``: ``max(min_end - max_start, 0) / (max_end - min_start)``, the
    ends taken as given; 0 where the script would divide by zero (both moments the same instant).

    >>> moment_iou([2, 6], [4, 8])
    0.3333333333333333
    >>> moment_iou([2, 6], (-100, -100))
    0.0
    """
    max0, min0 = max(gt[0], pred[0]), min(gt[0], pred[0])
    max1, min1 = max(gt[1], pred[1]), min(gt[1], pred[1])
    denom = max1 - min0
    return 0.0 if denom == 0 else max(min1 - max0, 0) / denom


def predicted_moment(text: str | None, duration: float, protocol: str = "raw") -> tuple[float, float]:
    """The moment compute_metrics.py scores for one answer (None: the episode gave none, read as "").

    ``raw``: the first pair of ``extract_time``, ``(-100, -100)`` when there is none.
    ``timelens-inference``: eval_dataloader.py's stored timestamps, ``[duration + 10, duration + 20]``
    when there is none, each end rounded to whole seconds; then the first pair.

    >>> predicted_moment("from 3.5 to 7.5", 30.0, "timelens-inference")
    (4.0, 8.0)
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    pairs = extract_time(text or "")
    if protocol == "raw":
        return pairs[0] if pairs else UNPARSEABLE
    if not pairs:
        pairs = [(duration + 10, duration + 20)]
    start, end = pairs[0]
    return float(round(start)), float(round(end))  # round(t / UNIT) * UNIT, UNIT = 1.0


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample], protocol: str = "raw") -> dict[str, Any]:
    """R1@0.3/0.5/0.7 (``IOU@3``, ``IOU@5``, ``IOU@7``) and ``mIOU``, in percent of the queries, as
    compute_metrics.py: per query the IoU of `predicted_moment` with the annotated span; R1@m the
    share with IoU >= m; mIoU the mean IoU; ``unparseable`` counts the answers extract_time could not
    read, ``reversed`` the scored moments with start >= end (the script warns for each, the
    (-100, -100) of an unreadable answer included; IoU 0 or less than it looks). Over the queries the run answered (the samples with an origin episode)."""
    answers = benchmark_answers(trajectories, samples, NAME)
    ious: list[float] = []
    unparseable = reversed_ = 0
    for sid in sorted(answers):
        sample, text = answers[sid]
        bench = sample.metadata["benchmark"]
        gt = (float(bench["span"][0]), float(bench["span"][1]))
        if not extract_time(text or ""):
            unparseable += 1
        moment = predicted_moment(text, float(bench["duration"]), protocol)
        reversed_ += moment[0] >= moment[1]
        ious.append(moment_iou(gt, moment))
    total = len(ious)
    out: dict[str, Any] = {"benchmark": NAME, "protocol": protocol, "n": total, "unparseable": unparseable, "reversed": reversed_}
    out.update(recall_and_miou(ious, THRESHOLDS))
    out["script"] = SCRIPT
    return out


def format_table(metrics: dict[str, Any]) -> str:
    """TimeLens-Bench's table: R1@0.3 | R1@0.5 | R1@0.7 | mIoU."""
    note = (f"{metrics['unparseable']} of {metrics['n']} answers had no readable moment, {metrics['reversed']} a reversed one "
            f"(protocol {metrics['protocol']}).")  # fmt: skip
    return moment_retrieval_table("Charades-TimeLens", metrics, note)
