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
"""

from __future__ import annotations

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text
from videoseek.envs.convert import ConvertOptions, RowError
from videoseek.envs.sample import VideoSample

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
