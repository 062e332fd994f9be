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
"""

from __future__ import annotations

import math

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text, text_list
from videoseek.envs.convert import ConvertOptions, RowError
from videoseek.envs.sample import ProblemType, VideoSample

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
