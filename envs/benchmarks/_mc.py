"""Helpers shared by the multiple-choice benchmark converters (VideoMME, MVBench, LVBench,
Video-Holmes, VSI-Bench): required fields with one-line errors, and the sample every one of them
builds, with the benchmark's record kept unchanged under ``metadata["benchmark"]``."""

from __future__ import annotations

import math
from typing import Any

from videoseek.envs.sample import ProblemType, VideoSample
from videoseek.envs.source_records import RowError, build_sample, jsonable, mc_letter, resolve_video


def text(record: dict, key: str) -> str:
    """The non-empty text of `record[key]` (numbers as text); `RowError(key)` otherwise."""
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise RowError(key, "missing or empty" if value is None or value == "" else f"expected text, got {type(value).__name__}")
    return value


def text_list(record: dict, key: str, min_len: int = 2) -> list[str]:
    """`record[key]` as a list of non-empty strings (parquet gives numpy arrays: listed first)."""
    value = record.get(key)
    if value is not None and not isinstance(value, (list, tuple, str, dict)) and hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RowError(key, f"expected a list of option strings, got {_short(value)}")
    if len(value) < min_len:
        raise RowError(key, f"expected at least {min_len} options, got {len(value)}")
    return [str(v) for v in value]


def _short(value: Any) -> str:
    text_ = repr(value)
    return text_ if len(text_) <= 60 else text_[:57] + "..."


def letter(answer: str, options: list[str], key: str) -> str:
    """The option letter the benchmark's answer names (`convert.mc_letter`, errors name `key`)."""
    return mc_letter(answer, options, key)


def positive_seconds(value: Any, key: str) -> float | None:
    """A positive finite number of seconds, None when absent; `RowError(key)` when malformed."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RowError(key, f"expected positive seconds, got {_short(value)}")
    return float(value)


def benchmark_sample(
    name: str,
    record: dict,
    location: str,
    root: str,
    *,
    sample_id: str,
    video: str,
    question: str,
    answer: str,
    options: list[str] | None,
    problem_type: ProblemType = ProblemType.multiple_choice,
    task_kind: str | None = None,
    duration: float | None = None,
    clue_intervals: list[tuple[float, float]] | None = None,
    reference_reasoning: str | None = None,
    extra: dict[str, Any] | None = None,
) -> VideoSample:
    """The `VideoSample` of one benchmark question. ``metadata.benchmark`` is the benchmark's record
    as written (keys starting with ``__`` are the reader's own and dropped) plus `extra`;
    ``metadata.task_kind`` is the benchmark's category (so plain `videoseek eval` breaks down by it)."""
    bench = {k: jsonable(v.tolist() if hasattr(v, "tolist") and not isinstance(v, (str, bytes)) else v)
             for k, v in record.items() if not k.startswith("__")}  # fmt: skip
    bench.update(extra or {})
    metadata: dict[str, Any] = {"benchmark": bench, "converted_from": f"{name}:{location}"}
    if task_kind:
        metadata["task_kind"] = task_kind
    return build_sample({
        "id": sample_id,
        "video": resolve_video(video, root),
        "question": question,
        "options": options,
        "answer": answer,
        "problem_type": problem_type.value,
        "duration": duration,
        "clue_intervals": clue_intervals or [],
        "reference_reasoning": reference_reasoning,
        "data_source": name,
        "metadata": metadata,
    })  # fmt: skip
