"""MVBench (Li et al. 2024, "MVBench: A Comprehensive Multi-modal Video Understanding Benchmark")
-> `VideoSample` rows.

Source: the ``json/`` folder of the Hugging Face dataset OpenGVLab/MVBench, one JSON array per
task (``action_sequence.json``, ``object_shuffle.json``, ...; the task of a file is its name, as in
``data_list`` of ``video_chat2/mvbench.ipynb`` in github.com/OpenGVLab/Ask-Anything, commit
71ac7a2), each record::

    {"video": "ZS9XR.mp4", "question": "What happened after the person took the food?",
     "candidates": ["Ate the medicine.", "Tidied up the blanket.", ...], "answer": "Ate the medicine.",
     "start": 11.1, "end": 19.6}          # start / end only in the tasks read with a bound

Pass the task files themselves (``videoseek convert --from mvbench json/*.json``). A record's video
is ``{prefix}{video}`` under ``--video-root`` (MVBench's ``video/`` folder), with the task's folder
prefix from ``data_list`` (``star/Charades_v1_480/``, ``clevrer/video_validation/``, ...).
Episodic Reasoning reads TVQA frame folders (``tvqa/frames_fps3_hq/NAME/00001.jpg``, 3 fps);
the env needs a video file, so its samples point at ``tvqa/frames_fps3_hq/NAME.mp4`` (make them
with ``ffmpeg -framerate 3 -i NAME/%05d.jpg NAME.mp4``, docs/benchmarks.md).

The question is MVBench's own; the options are its ``qa_template``'s ``(A) candidate`` lines and
the answer is the letter of the candidate equal to ``answer``. The tasks with a bound (MVBench
shows only ``[start, end]`` of the video) get ``clue_intervals = [[start, end]]``: the agent sees
the whole video and the span the question is about is its evidence. The record stays in
``metadata.benchmark`` with ``task_type`` (the task name) added; `videoseek.envs.benchmarks.mvbench`
scores the answers with the notebook's ``check_ans``.

Official metric. MVBench's official metrics (``video_chat2/mvbench.ipynb`` of github.com/OpenGVLab/Ask-Anything,
commit 71ac7a2: ``check_ans`` and the accuracy cells after it).

The notebook asks each question with MVBench's ``qa_template`` (options ``(A) candidate``), writes
"Best option:(" after the prompt and takes ``"(" + completion.strip().split('\n')[0]`` as the
prediction (its ``infer_mvbench``: "remove potential explanation"); `check_ans` compares the
prediction's first space-separated word, lower-cased and without ".", with the answer's ``(x)``:
correct when either contains the other. Accuracy is per task (20 tasks) and
``Avg``, the micro average over all questions (``correct / total``), in percent.

Here the prediction is the first line of the episode's final ``<answer>`` text, stripped, as the
notebook cuts its completion (`notebook_prediction`: "B", "(B) candidate", "B. candidate" and
"B\nA red sphere enters from the left." all read as B). An episode that gave no answer is wrong.
An ``<answer>`` with no text reads as "", which `check_ans` finds correct ("" is in every "(x)"),
as the notebook finds an empty completion correct (its prediction is then "(").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, text, text_list
from videoseek.envs.benchmarks._scoring import markdown_table, pct, scored
from videoseek.envs.sample import VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, iter_records
from videoseek.envs.trajectory import Trajectory

NAME = "mvbench"

# task -> (file, video folder prefix, data type, has bound): `data_list` of mvbench.ipynb.
TASKS: dict[str, tuple[str, str, str, bool]] = {
    "Action Sequence": ("action_sequence.json", "star/Charades_v1_480/", "video", True),
    "Action Prediction": ("action_prediction.json", "star/Charades_v1_480/", "video", True),
    "Action Antonym": ("action_antonym.json", "ssv2_video/", "video", False),
    "Fine-grained Action": ("fine_grained_action.json", "Moments_in_Time_Raw/videos/", "video", False),
    "Unexpected Action": ("unexpected_action.json", "FunQA_test/test/", "video", False),
    "Object Existence": ("object_existence.json", "clevrer/video_validation/", "video", False),
    "Object Interaction": ("object_interaction.json", "star/Charades_v1_480/", "video", True),
    "Object Shuffle": ("object_shuffle.json", "perception/videos/", "video", False),
    "Moving Direction": ("moving_direction.json", "clevrer/video_validation/", "video", False),
    "Action Localization": ("action_localization.json", "sta/sta_video/", "video", True),
    "Scene Transition": ("scene_transition.json", "scene_qa/video/", "video", False),
    "Action Count": ("action_count.json", "perception/videos/", "video", False),
    "Moving Count": ("moving_count.json", "clevrer/video_validation/", "video", False),
    "Moving Attribute": ("moving_attribute.json", "clevrer/video_validation/", "video", False),
    "State Change": ("state_change.json", "perception/videos/", "video", False),
    "Fine-grained Pose": ("fine_grained_pose.json", "nturgbd/", "video", False),
    "Character Order": ("character_order.json", "perception/videos/", "video", False),
    "Egocentric Navigation": ("egocentric_navigation.json", "vlnqa/", "video", False),
    "Episodic Reasoning": ("episodic_reasoning.json", "tvqa/frames_fps3_hq/", "frame", True),
    "Counterfactual Inference": ("counterfactual_inference.json", "clevrer/video_validation/", "video", False),
}
TASK_OF_FILE = {spec[0]: task for task, spec in TASKS.items()}

FIELDS = {
    "(file name)": "the task: metadata.task_kind and metadata.benchmark.task_type (action_sequence.json -> Action Sequence)",
    "video": "video '{task prefix}{video}' under --video-root (Episodic Reasoning: '{prefix}{video}.mp4')",
    "question": "question",
    "candidates": "options '(A) candidate', '(B) ...' (MVBench's qa_template)",
    "answer": "answer: the letter of the candidate equal to it",
    "start, end": "clue_intervals [[start, end]] for the tasks MVBench reads with a bound",
    "everything": "metadata.benchmark (the record as written, + task_type)",
    "id": "'{file stem}-{position in the file}' (MVBench has no question ids)",
}


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """The records of one task file, each with ``__task__`` (from the file name) and ``__pos__``
    (its 0-based position in the file); a file that is no MVBench task is one bad row."""
    name = Path(path).name
    task = TASK_OF_FILE.get(name)
    if task is None:
        raise_at = f"{path}:1"
        yield raise_at, RowError("file", f"{name!r} is not an MVBench task file (expected one of {sorted(TASK_OF_FILE)})")
        return
    for pos, (location, record) in enumerate(iter_records(path)):
        yield location, ({**record, "__task__": task, "__pos__": pos} if isinstance(record, dict) else record)


def _bound(record: dict) -> tuple[float, float]:
    values = []
    for key in ("start", "end"):
        v = record.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise RowError(key, f"this task is read with a bound: expected seconds >= 0, got {v!r}")
        values.append(float(v))
    if values[1] <= values[0]:
        raise RowError("end", f"needs start < end, got {values}")
    return values[0], values[1]


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One MVBench record -> `VideoSample` (mapping: `FIELDS`)."""
    task = record.get("__task__")
    if task not in TASKS:
        raise RowError("file", "MVBench records are read from their task files (json/<task>.json)")
    file_name, prefix, data_type, has_bound = TASKS[task]
    video = text(record, "video")
    candidates = text_list(record, "candidates")
    answer = text(record, "answer")
    if answer not in candidates:
        raise RowError("answer", f"{answer!r} is none of the candidates {candidates}")
    idx = candidates.index(answer)
    options = [f"({chr(ord('A') + k)}) {c}" for k, c in enumerate(candidates)]
    clues = [_bound(record)] if has_bound else []
    return benchmark_sample(
        NAME, record, location, root,
        sample_id=f"{Path(file_name).stem}-{record['__pos__']}",
        video=prefix + video + (".mp4" if data_type == "frame" else ""),
        question=text(record, "question"),
        options=options,
        answer=chr(ord("A") + idx),
        task_kind=task,
        clue_intervals=clues,
        extra={"task_type": task, "data_type": data_type, "bound": has_bound},
    )  # fmt: skip


# The official metric: scoring a run's trajectories as the benchmark's own script does.

# The paper's column abbreviations (MVBench Table 2), in data_list order.
ABBREVIATIONS = dict(zip(TASKS, ("AS", "AP", "AA", "FA", "UA", "OE", "OI", "OS", "MD", "AL", "ST", "AC", "MC", "MA", "SC", "FP", "CO", "EN", "ER", "CI")))


def check_ans(pred: str, gt: str) -> bool:
    """mvbench.ipynb's ``check_ans``: ``gt`` is "(B) candidate"; True when the prediction's first
    word (lower case, "." removed) is in gt's "(b)" or gt's "(b)" is in that word.

    >>> check_ans("B", "(B) Ate the medicine."), check_ans("(b) ate", "(B) Ate"), check_ans("A", "(B) Ate")
    (True, True, False)
    """
    pred_option = pred.lower().split(" ")[0]
    gt_option = gt.lower().split(" ")[0]
    return pred_option.replace(".", "") in gt_option or gt_option in pred_option


def notebook_prediction(text: str) -> str:
    """What mvbench.ipynb's ``infer_mvbench`` keeps of a completion: ``text.strip().split('\\n')[0]``.

    >>> notebook_prediction("  B\\nA red sphere enters from the left.")
    'B'
    """
    return text.strip().split("\n")[0]


def ground_truth(record: dict[str, Any]) -> str:
    """The notebook's answer string ``(letter) answer`` for a record (qa_template)."""
    idx = list(record["candidates"]).index(record["answer"])
    return f"({chr(ord('A') + idx)}) {record['answer']}"


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """Per-task accuracy and Avg (percent) as mvbench.ipynb computes them (module docstring)."""
    acc: dict[str, list[int]] = {}
    for traj, _sample, rec in scored(trajectories, samples, NAME):
        task = rec["task_type"]
        c = acc.setdefault(task, [0, 0])
        c[1] += 1
        pred = traj.prediction if traj.failure is None else None
        c[0] += int(pred is not None and check_ans(notebook_prediction(pred), ground_truth(rec)))
    order = [t for t in TASKS if t in acc] + sorted(set(acc) - set(TASKS))
    correct, total = sum(c[0] for c in acc.values()), sum(c[1] for c in acc.values())
    return {
        "benchmark": NAME, "scale": "percent", "questions": total, "correct": correct,
        "by_task": {t: pct(*acc[t]) for t in order}, "counts": {t: acc[t] for t in order},
        "avg": pct(correct, total),
    }  # fmt: skip


def format_table(metrics: dict[str, Any]) -> str:
    """MVBench's table: one column per task (the paper's abbreviations), then Avg."""
    tasks = list(metrics["by_task"])
    headers = [ABBREVIATIONS.get(t, t) for t in tasks] + ["Avg"]
    return markdown_table(headers, [[metrics["by_task"][t] for t in tasks] + [metrics["avg"]]])
