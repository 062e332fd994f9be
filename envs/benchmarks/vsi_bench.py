"""VSI-Bench (Yang et al. 2024, "Thinking in Space: How Multimodal Large Language Models See,
Remember, and Recall Spaces") -> `VideoSample` rows.

Source: the test split of the Hugging Face dataset nyu-visionx/VSI-Bench (``test.jsonl`` /
parquet; the rows github.com/vision-x-nyu/thinking-in-space's ``lmms_eval/tasks/vsibench``,
commit c26ba54, evaluates), one row per question::

    {"id": 1, "dataset": "arkitscenes", "scene_name": "41069025", "question_type": "object_counting",
     "question": "How many chair(s) are in this room?", "options": null, "ground_truth": "4"}
    {"id": 2, ..., "question_type": "object_rel_direction_easy", "options": ["A. left", "B. right", ...],
     "ground_truth": "B"}

Multiple-choice types (``object_rel_direction_{easy,medium,hard}``, ``object_rel_distance``,
``route_planning``, ``obj_appearance_order``) become multiple-choice samples with the options as
written and the letter ``ground_truth``; numerical-answer types (``object_abs_distance``,
``object_counting``, ``object_size_estimation``, ``room_size_estimation``) numerical ones whose
answer is the number (scored by mean relative accuracy). The video is
``{dataset}/{scene_name}.mp4`` under ``--video-root`` (as ``vsibench_doc_to_visual``).
VSI-Bench has no clue intervals.

Official metric. VSI-Bench's official metrics (``lmms_eval/tasks/vsibench/utils.py`` of
github.com/vision-x-nyu/thinking-in-space, commit c26ba54: ``vsibench_process_results`` and
``vsibench_aggregate_results``).

Each prediction is cut to its first space-separated word, trailing "." removed
(``fuzzy_matching``). Multiple-choice (MCA) types score exact match with the letter, case folded;
numerical-answer (NA) types score mean relative accuracy: ``|pred - gt| / gt <= 1 - theta`` averaged
over the thresholds ``theta = numpy.linspace(0.5, 0.95, int((.95 - .5) / .05 + 2))``, utils.py's
expression, which is 10 points in floating point (0.5, 0.55, ..., 0.95), 0 when the prediction is
not a number. Each question type
is averaged; the three ``object_rel_direction_*`` difficulties are averaged into one
``object_rel_direction``; ``overall`` is the mean of the resulting per-type scores (a macro
average over the types present). All in percent, as utils.py reports them.

Here the prediction is the episode's final ``<answer>`` text ("" when it gave none: 0).
Differences where utils.py would crash: a ground truth of 0 (a ZeroDivisionError there) scores
1 for a prediction of 0 and 0 otherwise; when only some of the three direction difficulties are
present (a KeyError there), those present are averaged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text, text_list
from videoseek.envs.benchmarks._scoring import answer_text, markdown_table, scored
from videoseek.envs.sample import ProblemType, VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError
from videoseek.envs.trajectory import Trajectory

NAME = "vsi-bench"
# utils.py's MCA_QUESTION_TYPES and NA_QUESTION_TYPES
MCA_QUESTION_TYPES = (
    "object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard",
    "object_rel_distance", "route_planning", "obj_appearance_order",
)  # fmt: skip
NA_QUESTION_TYPES = ("object_abs_distance", "object_counting", "object_size_estimation", "room_size_estimation")

FIELDS = {
    "id": "id (VSI-Bench's own, as text)",
    "dataset, scene_name": "video '{dataset}/{scene_name}.mp4' under --video-root",
    "question": "question",
    "question_type": "problem_type (multiple_choice for the MCA types, numerical for the NA types); metadata.task_kind",
    "options": "options ('A. ...' as written; MCA types only)",
    "ground_truth": "answer (the option letter, or the number)",
    "everything": "metadata.benchmark (the row as written)",
}


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One VSI-Bench row -> `VideoSample` (mapping: `FIELDS`)."""
    qid = text(record, "id")
    qtype = text(record, "question_type")
    truth = text(record, "ground_truth").strip()
    if qtype in MCA_QUESTION_TYPES:
        options = text_list(record, "options")
        answer, ptype = letter(truth, options, "ground_truth"), ProblemType.multiple_choice
    elif qtype in NA_QUESTION_TYPES:
        try:
            value = float(truth)
        except ValueError:
            raise RowError("ground_truth", f"a {qtype} answer must be a number, got {truth!r}") from None
        if not math.isfinite(value):
            raise RowError("ground_truth", f"a {qtype} answer must be finite, got {truth!r}")
        options, answer, ptype = None, truth, ProblemType.numerical
    else:
        raise RowError("question_type", f"unknown question type {qtype!r} (known: {list(MCA_QUESTION_TYPES + NA_QUESTION_TYPES)})")
    return benchmark_sample(
        NAME, record, location, root,
        sample_id=qid,
        video=f"{text(record, 'dataset')}/{text(record, 'scene_name')}.mp4",
        question=text(record, "question"),
        options=options,
        answer=answer,
        problem_type=ptype,
        task_kind=qtype,
    )  # fmt: skip


# The official metric: scoring a run's trajectories as the benchmark's own script does.

DIRECTION = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard")
# The paper's table (VSI-Bench Table 1) and utils.py's tabulated order.
COLUMNS = {
    "object_counting": "Obj. Count", "object_abs_distance": "Abs. Dist.", "object_size_estimation": "Obj. Size",
    "room_size_estimation": "Room Size", "object_rel_distance": "Rel. Dist.", "object_rel_direction": "Rel. Dir.",
    "route_planning": "Route Plan", "obj_appearance_order": "Appr. Order",
}  # fmt: skip
MRA_THRESHOLDS = np.linspace(0.5, 0.95, int((0.95 - 0.5) / 0.05 + 2))


def fuzzy_matching(pred: str) -> str:
    """utils.py's ``fuzzy_matching``: the first space-separated word, trailing "." removed."""
    return pred.split(" ")[0].rstrip(".").strip()


def to_float(text: str) -> float | None:
    """utils.py's ``to_float``: the number, or None."""
    try:
        return float(text)
    except (TypeError, ValueError, OverflowError):
        return None


def mean_relative_accuracy(pred: float | None, target: float) -> float:
    """utils.py's ``mean_relative_accuracy`` with start .5, end .95, interval .05 (0 for no number).

    >>> mean_relative_accuracy(4.0, 4.0), round(mean_relative_accuracy(5.0, 4.0), 4), mean_relative_accuracy(None, 4.0)
    (1.0, 0.6, 0.0)
    """
    if pred is None:
        return 0.0
    if target == 0:
        return float(pred == 0)
    return float((abs(pred - target) / target <= 1 - MRA_THRESHOLDS).mean())


def question_score(prediction: str, qtype: str, ground_truth: str) -> float:
    """One question's score in [0, 1]: exact match (MCA) or mean relative accuracy (NA)."""
    word = fuzzy_matching(prediction)
    if qtype in MCA_QUESTION_TYPES:
        return 1.0 if word.lower() == ground_truth.lower() else 0.0
    if qtype in NA_QUESTION_TYPES:
        target = to_float(ground_truth)
        return 0.0 if target is None else mean_relative_accuracy(to_float(word), target)
    raise ValueError(f"unknown VSI-Bench question type {qtype!r}")


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """Per-type scores and overall (percent) as vsibench_aggregate_results computes them."""
    scores: dict[str, list[float]] = defaultdict(list)
    for traj, _sample, rec in scored(trajectories, samples, NAME):
        qtype = rec["question_type"]
        scores[qtype].append(question_score(answer_text(traj), qtype, str(rec["ground_truth"]).strip()))
    per_type = {q: float(np.mean(v)) for q, v in scores.items()}
    output = {q: v for q, v in per_type.items() if q not in DIRECTION}
    directions = [per_type[q] for q in DIRECTION if q in per_type]
    if directions:
        output["object_rel_direction"] = sum(directions) / len(directions)
    overall = sum(output.values()) / len(output) if output else 0.0
    metric = {q: ("accuracy" if q in MCA_QUESTION_TYPES or q == "object_rel_direction" else "MRA:.5:.95:.05") for q in output}
    return {
        "benchmark": NAME, "scale": "percent", "questions": sum(len(v) for v in scores.values()),
        "overall": 100.0 * overall,
        "by_type": {q: 100.0 * output[q] for q in [c for c in COLUMNS if c in output] + sorted(set(output) - set(COLUMNS))},
        "metric": metric,
        "by_question_type": {q: 100.0 * v for q, v in sorted(per_type.items())},
        "counts": {q: len(v) for q, v in sorted(scores.items())},
    }  # fmt: skip


def format_table(metrics: dict[str, Any]) -> str:
    """VSI-Bench's table: Avg., then the numerical-answer types (MRA) and the multiple-choice
    types (accuracy) in the paper's order ("-" for a type without questions)."""
    by = metrics["by_type"]
    return markdown_table(["Avg.", *COLUMNS.values()], [[metrics["overall"], *(by.get(q) for q in COLUMNS)]])
