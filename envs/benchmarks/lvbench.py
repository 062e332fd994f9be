"""LVBench (Wang et al. 2024, "LVBench: An Extreme Long Video Understanding Benchmark") ->
`VideoSample` rows.

Source: ``video_info.meta.jsonl`` of the Hugging Face dataset THUDM/LVBench (the file
github.com/THUDM/LVBench's ``data/README.md`` and ``lvbench/metrics/compute_accuracy.py``, commit
f998d95, read), one line per video::

    {"key": "Cm73ma6Ibcs", "type": "sports", "video_info": {"duration_minutes": 68.9, "fps": 30, ...},
     "qa": [{"uid": "1", "question": "What ...?\n(A) ...\n(B) ...\n(C) ...\n(D) ...", "answer": "B",
             "question_type": ["key information retrieval"], "time_reference": "01:10-01:20"}, ...]}

One sample per ``qa`` entry, id ``uid`` (LVBench's own; compute_accuracy keys answers by it). The
``(A) ...`` lines of the question become ``options`` as written; the answer is the letter.
``time_reference`` (``MM:SS-MM:SS`` or ``HH:MM:SS-HH:MM:SS``) is the question's evidence span:
``clue_intervals = [[s, e]]`` (an empty one gives none). A question may have several
``question_type``s (the categories: entity recognition, event understanding, key information
retrieval, temporal grounding, reasoning, summarization); they are kept as a list and the first
is ``metadata.task_kind``. The video is ``{key}.mp4`` under ``--video-root``; ``duration`` is
``video_info.duration_minutes * 60`` when given.

Official metric. LVBench's official metrics (github.com/THUDM/LVBench, commit f998d95:
``lvbench/utils/answer_util.py``'s ``polish_answer`` for the answer letter,
``lvbench/metrics/compute_accuracy.py``'s ``compute_accuracy`` for the accuracies, and
``scripts/test_acc.py``'s names for the leaderboard columns).

`polish_answer` cuts a response at the first ")", takes what follows a "(", then the first word,
then its first character. `compute_accuracy` compares that with the answer letter exactly, over the
questions in the answer file only: overall accuracy is ``right / total`` (micro), and each
category's is over the questions that have it (a question may have several ``question_type``s and
counts in each). The script returns fractions; they are reported here in percent.

Here the response is the episode's final ``<answer>`` text ("" when it gave none, which is wrong).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, positive_seconds, text
from videoseek.envs.benchmarks._scoring import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, iter_records, options_from_question, span_field
from videoseek.envs.trajectory import Trajectory

NAME = "lvbench"
VIDEO_FIELDS = ("key", "type", "video_info")
CATEGORIES = (
    "entity recognition", "event understanding", "key information retrieval",
    "temporal grounding", "reasoning", "summarization",
)  # fmt: skip

FIELDS = {
    "qa[k].uid": "id (LVBench's own question id)",
    "key": "video '{key}.mp4' under --video-root",
    "qa[k].question": "question (the '(A) ...' lines split off as options, written as given)",
    "qa[k].answer": "answer (the option letter)",
    "qa[k].question_type": "metadata.benchmark.question_type (a list: the per-category accuracies); the first is metadata.task_kind",
    "qa[k].time_reference": "clue_intervals [[s, e]] ('MM:SS-MM:SS')",
    "video_info.duration_minutes": "duration (x 60)",
    "type": "metadata.benchmark.type (the video's genre)",
    "everything": "metadata.benchmark (the qa entry with its video's key, type and video_info)",
}


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """One record per ``qa`` entry of each video line, carrying the video's ``key``, ``type`` and
    ``video_info``."""
    for location, record in iter_records(path):
        if not isinstance(record, dict):
            yield location, record
            continue
        qa = record.get("qa")
        if not isinstance(qa, list) or not qa:
            yield location, RowError("qa", "expected a non-empty list of questions")
            continue
        video = {k: record[k] for k in VIDEO_FIELDS if k in record}
        for k, q in enumerate(qa):
            yield f"{location} (qa.{k})", ({**video, **q} if isinstance(q, dict) else q)


def _duration(record: dict) -> float | None:
    info = record.get("video_info")
    if info is None:
        return None
    if not isinstance(info, dict):
        raise RowError("video_info", f"expected an object, got {type(info).__name__}")
    minutes = positive_seconds(info.get("duration_minutes"), "video_info.duration_minutes")
    return None if minutes is None else minutes * 60.0


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One LVBench question -> `VideoSample` (mapping: `FIELDS`)."""
    uid = text(record, "uid")
    key = text(record, "key")
    question, options = options_from_question(text(record, "question"))
    if not options:
        raise RowError("question", "no '(A) ...' option lines after the question")
    answer = letter(text(record, "answer"), options, "answer")
    types = record.get("question_type")
    if isinstance(types, str):
        types = [types]
    if not isinstance(types, list) or not types or not all(isinstance(t, str) and t for t in types):
        raise RowError("question_type", f"expected a non-empty list of categories, got {types!r}")
    ref = record.get("time_reference")
    clues = [span_field(ref, "time_reference")] if isinstance(ref, str) and ref.strip() else []
    if ref is not None and not isinstance(ref, str):
        raise RowError("time_reference", f"expected 'MM:SS-MM:SS', got {ref!r}")
    duration = _duration(record)
    if duration is not None and clues and clues[0][1] > duration + 1.0:
        raise RowError("time_reference", f"{ref!r} ends after the video ({duration:.1f} s)")
    if duration is not None and clues:
        clues = [(clues[0][0], min(clues[0][1], duration))]
    return benchmark_sample(
        NAME, record, location, root,
        sample_id=uid,
        video=f"{key}.mp4",
        question=question,
        options=options,
        answer=answer,
        task_kind=types[0],
        duration=duration,
        clue_intervals=clues,
    )  # fmt: skip


# The official metric: scoring a run's trajectories as the benchmark's own script does.

# scripts/test_acc.py's name_map, in the order of the paper's table (ER, EU, KIR, TG, Rea, Sum, Overall).
COLUMNS = {
    "entity recognition": "ER", "event understanding": "EU", "key information retrieval": "KIR",
    "temporal grounding": "TG", "reasoning": "Rea", "summarization": "Sum",
}  # fmt: skip


def polish_answer(answer: str) -> str:
    """answer_util.py's ``polish_answer``: the option letter of a response.

    >>> polish_answer("(B) a dog"), polish_answer("C. because"), polish_answer(" D) x"), polish_answer("")
    ('B', 'C', 'D', '')
    """
    answer = answer.strip()
    answer = answer.split(")")[0].strip()
    if "(" in answer:
        answer = answer.split("(")[1].strip()
    answer = answer.split(" ")[0]
    return answer[0] if len(answer) > 0 else answer


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """Overall and per-category accuracy (percent) as compute_accuracy.py computes them."""
    right = total = 0
    cat_right: dict[str, int] = defaultdict(int)
    cat_total: dict[str, int] = defaultdict(int)
    for traj, _sample, rec in scored(trajectories, samples, NAME):
        hit = polish_answer(answer_text(traj)) == rec["answer"]
        types = rec["question_type"] if isinstance(rec["question_type"], list) else [rec["question_type"]]
        for category in types:
            cat_total[category] += 1
            cat_right[category] += int(hit)
        right += int(hit)
        total += 1
    order = [c for c in COLUMNS if c in cat_total] + sorted(set(cat_total) - set(COLUMNS))
    return {
        "benchmark": NAME, "scale": "percent", "questions": total, "correct": right,
        "overall": pct(right, total), "by_category": {c: pct(cat_right[c], cat_total[c]) for c in order},
        "counts": {c: [cat_right[c], cat_total[c]] for c in order},
    }  # fmt: skip


def format_table(metrics: dict[str, Any]) -> str:
    """LVBench's table: ER, EU, KIR, TG, Rea, Sum, Overall (categories without questions: "-")."""
    by = metrics["by_category"]
    extra = [c for c in by if c not in COLUMNS]
    headers = list(COLUMNS.values()) + extra + ["Overall"]
    return markdown_table(headers, [[by.get(c) for c in COLUMNS] + [by[c] for c in extra] + [metrics["overall"]]])
