"""Video-Holmes's official metrics (``evaluate.py`` of github.com/TencentARC/Video-Holmes, commit
52ef8da, function ``evaluate``).

evaluate.py asks for ``<think>...</think><answer>...</answer>`` and reads the model's whole
response: the text of its last ``<answer>`` (the whole response when there is none), then the
first letter test that matches in this order — "A " / "A:" / "[A" for A, B, C, D, E, F, then a bare
A ... F anywhere — else "WRONG". Accuracy is per question type (SR, IMC, TCI, TA, MHR, PAR, CTI;
0 for a type without questions) and overall, ``correct / questions`` over all of them (micro;
the README's "Avg" column). The script writes fractions with two decimals; here they are percent.

Here the response is the episode's whole last assistant turn, which in VideoSeek's protocol holds
the ``<think>`` and the ``<answer>`` as evaluate.py's prompt asks (an episode that ended on a tool
call is read the same way, as the script reads a response without answer tags).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from videoseek.agents.benchmarks._common import final_turn_text, markdown_table, pct, scored
from videoseek.envs.benchmarks.video_holmes import QUESTION_TYPES
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory

NAME = "video-holmes"
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
LETTERS = "ABCDEF"


def extract_answer(response: str) -> str:
    """evaluate.py's answer letter of a response (module docstring); "WRONG" when none matches.

    >>> extract_answer("<think>It is not A.</think><answer>C</answer>"), extract_answer("B: the dog"), extract_answer("none")
    ('C', 'B', 'WRONG')
    """
    matches = _ANSWER.findall(response)
    choice = matches[-1].strip() if matches else response
    for x in LETTERS:
        if f"{x} " in choice or f"{x}:" in choice or f"[{x}" in choice:
            return x
    for x in LETTERS:
        if x in choice:
            return x
    return "WRONG"


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample]) -> dict[str, Any]:
    """Per-type and overall accuracy (percent) as evaluate.py computes them (module docstring)."""
    correct: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    predictions = {}
    for traj, sample, rec in scored(trajectories, samples, NAME):
        qtype = rec["Question Type"]
        pred = extract_answer(final_turn_text(traj))
        predictions[sample.id] = pred
        correct[qtype] += int(pred == rec["Answer"])
        total[qtype] += 1
    n, right = sum(total.values()), sum(correct.values())
    extra = sorted(set(total) - set(QUESTION_TYPES))
    return {
        "benchmark": NAME, "scale": "percent", "questions": n, "correct": right,
        "by_type": {q: pct(correct[q], total[q]) for q in (*QUESTION_TYPES, *extra)},
        "counts": {q: [correct[q], total[q]] for q in (*QUESTION_TYPES, *extra)},
        "overall": pct(right, n), "predictions": predictions,
    }  # fmt: skip


def format_table(metrics: dict[str, Any]) -> str:
    """Video-Holmes's table: SR, IMC, TCI, TA, MHR, PAR, CTI, Overall."""
    by = metrics["by_type"]
    return markdown_table([*by, "Overall"], [[*by.values(), metrics["overall"]]])
