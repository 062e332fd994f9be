"""Video-Holmes (Cheng et al. 2025, "Video-Holmes: Can MLLM Think Like Holmes for Complex Video
Reasoning?") -> `VideoSample` rows.

Source: ``Benchmark/test_Video-Holmes.json`` (Hugging Face dataset TencentARC/Video-Holmes,
unpacked by github.com/TencentARC/Video-Holmes's ``download.py``; read by its ``evaluate.py``,
commit 52ef8da), a JSON array of questions::

    {"video ID": "RSmjqss0XKQ", "Question ID": "RSmjqss0XKQ_1", "Question Type": "SR",
     "Question": "...", "Options": {"A": "...", "B": "...", ...}, "Answer": "C", "Explanation": "..."}

Question types: SR (social reasoning), IMC (intention and motive chaining), TCI (temporal causal
inference), TA (timeline analysis), MHR (multimodal hint reasoning), PAR (physical anomaly
reasoning), CTI (core theme inference). The video is ``{video ID}.mp4`` under ``--video-root``
(``Benchmark/videos/``). Options are written ``A: text`` as evaluate.py's prompt does;
``Explanation`` becomes the ``reference_reasoning``. Video-Holmes has no clue intervals.

Official metric. Video-Holmes's official metrics (``evaluate.py`` of github.com/TencentARC/Video-Holmes, commit
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

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text
from videoseek.envs.benchmarks._scoring import final_turn_text, markdown_table, pct, scored
from videoseek.envs.sample import VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards.tags import last_block

NAME = "video-holmes"
QUESTION_TYPES = ("SR", "IMC", "TCI", "TA", "MHR", "PAR", "CTI")  # evaluate.py's question_types

FIELDS = {
    "Question ID": "id (Video-Holmes's own)",
    "video ID": "video '{video ID}.mp4' under --video-root",
    "Question": "question",
    "Options": "options 'A: text', 'B: text', ... (in the object's order)",
    "Answer": "answer (the option letter)",
    "Question Type": "metadata.task_kind (SR, IMC, TCI, TA, MHR, PAR, CTI: the per-type accuracies)",
    "Explanation": "reference_reasoning",
    "everything": "metadata.benchmark (the record as written)",
}


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Video-Holmes question -> `VideoSample` (mapping: `FIELDS`)."""
    qid = text(record, "Question ID")
    video = text(record, "video ID")
    qtype = text(record, "Question Type")
    raw = record.get("Options")
    if not isinstance(raw, dict) or len(raw) < 2 or not all(isinstance(v, str) for v in raw.values()):
        raise RowError("Options", f"expected an object {{letter: text}} with at least two options, got {raw!r}"[:200])
    keys = list(raw)
    if keys != [chr(ord("A") + k) for k in range(len(keys))]:
        raise RowError("Options", f"expected the letters A, B, C, ... in order, got {keys}")
    options = [f"{k}: {v}" for k, v in raw.items()]
    answer = letter(text(record, "Answer"), options, "Answer")
    explanation = record.get("Explanation")
    return benchmark_sample(
        NAME, record, location, root,
        sample_id=qid,
        video=f"{video}.mp4",
        question=text(record, "Question"),
        options=options,
        answer=answer,
        task_kind=qtype,
        reference_reasoning=explanation.strip() if isinstance(explanation, str) and explanation.strip() else None,
    )  # fmt: skip


# The official metric: scoring a run's trajectories as the benchmark's own script does.

LETTERS = "ABCDEF"


def extract_answer(response: str) -> str:
    """evaluate.py's answer letter of a response (module docstring); "WRONG" when none matches.

    >>> extract_answer("<think>It is not A.</think><answer>C</answer>"), extract_answer("B: the dog"), extract_answer("none")
    ('C', 'B', 'WRONG')
    """
    found = last_block(response, "answer")  # evaluate.py's `<answer>\s*(.*?)\s*</answer>`, last match, stripped
    choice = found.strip() if found is not None else response
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
