"""LVBench's official metrics (github.com/THUDM/LVBench, commit f998d95:
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
from collections.abc import Sequence
from typing import Any

from videoseek.agents.benchmarks._common import answer_text, markdown_table, pct, scored
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory

NAME = "lvbench"
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
