"""MVBench's official metrics (``video_chat2/mvbench.ipynb`` of github.com/OpenGVLab/Ask-Anything,
commit 71ac7a2: ``check_ans`` and the accuracy cells after it).

The notebook asks each question with MVBench's ``qa_template`` (options ``(A) candidate``), writes
"Best option:(" after the prompt and takes ``"(" + completion.strip().split('\\n')[0]`` as the
prediction (its ``infer_mvbench``: "remove potential explanation"); `check_ans` compares the
prediction's first space-separated word, lower-cased and without ".", with the answer's ``(x)``:
correct when either contains the other. Accuracy is per task (20 tasks) and
``Avg``, the micro average over all questions (``correct / total``), in percent.

Here the prediction is the first line of the episode's final ``<answer>`` text, stripped, as the
notebook cuts its completion (`notebook_prediction`: "B", "(B) candidate", "B. candidate" and
"B\\nA red sphere enters from the left." all read as B). An episode that gave no answer is wrong.
An ``<answer>`` with no text reads as "", which `check_ans` finds correct ("" is in every "(x)"),
as the notebook finds an empty completion correct (its prediction is then "(").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from videoseek.agents.benchmarks._common import markdown_table, pct, scored
from videoseek.envs.benchmarks.mvbench import TASKS
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory

NAME = "mvbench"
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
