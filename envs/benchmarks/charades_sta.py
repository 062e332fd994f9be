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
stays in ``metadata.benchmark``: `videoseek.envs.benchmarks.charades_sta` scores against it, so a
moment the schema cannot hold as a clue interval (end <= start, a handful in the source files) is
kept as a sample with no clue interval instead of being dropped from the benchmark.

Official metric. Charades-STA metrics as lmms-eval computes them: R1@0.3, R1@0.5, R1@0.7 and mIoU, in percent.

Official script: ``lmms_eval/tasks/charades_sta/utils.py`` of github.com/EvolvingLMMs-Lab/lmms-eval
(commit 75571cfe0fa36ca5ec2e6aa2bb268f9d38295af3; the file last changed in 26f1d8e3):
``extract_time`` reads the moment out of the model's text, ``iou`` scores it against the
annotation, ``_temporal_grounding_compute_metrics`` averages over every query. That is the
in-framework successor of the standalone ``eval_tvg.py`` beside it (TimeChat's), which differs in
two ways we do not follow: it has no ``MM:SS - MM:SS`` reading, and it scores an unreadable answer
with the moment ``[gt_end + 10, gt_end + 20]`` (IoU 0 as well).

The model's text is the trajectory's final answer (``prediction``, the text inside ``<answer>``);
an episode with no answer (truncated, failed) scores 0 and counts as a bad prediction, as a text
with no readable moment does. The truth is ``metadata.benchmark.timestamp`` of the sample, as
`videoseek.envs.benchmarks.charades_sta` wrote it. Charades-STA has no category breakdown.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._scoring import benchmark_answers, moment_retrieval_table, recall_and_miou
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, build_sample, iter_records, jsonable, resolve_video
from videoseek.envs.trajectory import Trajectory

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
    source = {key: jsonable(v) for key, v in record.items() if key != "__k__"}
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
    return build_sample(row)


# The official metric: scoring a run's trajectories as the benchmark's own script does.

THRESHOLDS = (0.3, 0.5, 0.7)

# What extract_time strips before reading (an example some prompts carry).
_EXAMPLE = "a specific example is : 20.8 - 30.0 seconds"
_KEYWORDS = ("starts", "ends", "happens in", "start time", "end time", "start", "end", "happen")
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2})?"
_CLOCK_RANGE = re.compile(rf"\b({_CLOCK})\s*[–-]\s*({_CLOCK})\b")
_NUMBER_RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*[–-]\s*(\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"\b(\d+(?:\.\d+)?)\b")
_CLOCK_ONE = re.compile(rf"\b({_CLOCK})\b")
_NUMBER_RANGE_UNITS = re.compile(r"(\d+(?:\.\d+)?)\s*s?\s*[–-]\s*(\d+(?:\.\d+)?)\s*s?")


def clock_seconds(text: str) -> float:
    """Seconds of ``MM:SS`` or ``HH:MM:SS`` (lmms-eval ``_time_to_seconds``)."""
    parts = [float(p) for p in text.split(":")]
    if len(parts) == 3:
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    return parts[0] * 60 + parts[1]


def _pairs(times: list[float]) -> list[tuple[float, float]]:
    times = times[: len(times) // 2 * 2]
    return [(times[i], times[i + 1]) for i in range(0, len(times), 2)]


def extract_moment(text: str) -> list[list[float]]:
    """The moment in a model's answer as lmms-eval's ``extract_time`` reads it: ``[[s, e]]`` or ``[]``.

    The text is lower-cased and every "to" becomes "-" (so "3 to 7" reads as "3 - 7"); it is split
    into sentences at ``!``, ``?`` and new lines, and those with a keyword ("start", "end",
    "happen", ...) are searched (all of them when none has one). The first rule that finds
    something wins: a clock range "MM:SS - MM:SS"; a number range "s - e" (first sentence with
    one); clock times, paired in order; the first number of each sentence, paired in order; a
    range with "s" units. Only the first pair is kept, its ends swapped if not increasing.

    >>> extract_moment("The event happens in the 24.3 - 30.4 seconds.")
    [[24.3, 30.4]]
    >>> extract_moment("It starts at 00:12 and ends at 00:20")
    [[12.0, 20.0]]
    >>> extract_moment("no idea")
    []
    """
    paragraph = text.lower().replace(_EXAMPLE, "").replace("to", "-")
    sentences = re.split(r"[!?\n]", paragraph)
    candidates = [s for s in sentences if any(k in s for k in _KEYWORDS)] or sentences
    found: list[Any] = []
    for sentence in candidates:
        matches = _CLOCK_RANGE.findall(sentence)
        if matches:
            found = [[clock_seconds(a), clock_seconds(b)] for a, b in matches]
            break
    if not found:
        for sentence in candidates:
            matches = _NUMBER_RANGE.findall(sentence)
            if matches:
                found = [[float(a), float(b)] for a, b in matches]
                break
    if not found:
        found = _pairs([clock_seconds(t) for s in candidates for t in _CLOCK_ONE.findall(s)])
    if not found:
        firsts = [_NUMBER.findall(s) for s in candidates]
        found = _pairs([float(f[0]) for f in firsts if f])
    if not found:
        for sentence in candidates:
            matches = _NUMBER_RANGE_UNITS.findall(sentence)
            if matches:
                found = [[float(a), float(b)] for a, b in matches]
                break
    return [[s, e] if e > s else [e, s] for s, e in found[:1]]


def moment_iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Temporal IoU as lmms-eval's ``iou``: ``max(min_end - max_start, 0) / (max_end - min_start)``,
    0 when that span is empty. (The ends are taken as given: a reversed truth is not reordered.)

    >>> moment_iou([2, 6], [4, 8])
    0.3333333333333333
    """
    max0, min0 = max(a[0], b[0]), min(a[0], b[0])
    max1, min1 = max(a[1], b[1]), min(a[1], b[1])
    denom = max1 - min0
    return 0.0 if denom <= 0 else max(min1 - max0, 0) / denom


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """R1@0.3/0.5/0.7 (``IOU@3``, ``IOU@5``, ``IOU@7``) and ``mIOU``, in percent of the queries, as
    lmms-eval's ``_temporal_grounding_compute_metrics`` (lmms_eval/tasks/charades_sta/utils.py,
    commit 75571cfe): per query the IoU of ``extract_moment(answer)`` with the annotated moment, 0
    when the answer yields no moment (a "bad prediction"); R1@m the share with IoU >= m; mIoU the
    mean IoU. Over the queries the run answered (the samples with an origin episode)."""
    answers = benchmark_answers(trajectories, samples, NAME)
    ious: list[float] = []
    bad = 0
    for sid in sorted(answers):
        sample, text = answers[sid]
        gt = sample.metadata["benchmark"]["timestamp"]
        gt = (float(gt[0]), float(gt[1]))
        moment = extract_moment(text) if isinstance(text, str) else []
        if len(moment) != 1:
            bad += 1
            ious.append(0.0)
        else:
            ious.append(moment_iou(gt, moment[0]))
    total = len(ious)
    out: dict[str, Any] = {"benchmark": NAME, "n": total, "bad_predictions": bad}
    out.update(recall_and_miou(ious, THRESHOLDS))
    out["script"] = "lmms-eval lmms_eval/tasks/charades_sta/utils.py @ 75571cfe"
    return out


def format_table(metrics: dict[str, Any]) -> str:
    """The table of temporal-grounding papers (TimeChat, lmms-eval): R1@0.3 | R1@0.5 | R1@0.7 | mIoU."""
    return moment_retrieval_table("Charades-STA", metrics, f"{metrics['bad_predictions']} of {metrics['n']} answers had no readable moment (IoU 0).")
