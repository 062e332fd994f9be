"""`VideoSample`: one question about one video, with the annotations the rewards need.

Samples live in JSON Lines files, one per line. Relative video paths resolve against the
directory of the JSONL file. A bad row raises `DataError` naming the file, line and field.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from videoseek.envs.errors import DataError
from videoseek.rewards.accuracy import problem_type_name


class ProblemType(str, Enum):
    """The kind of answer a question wants. The public datasets' spellings are accepted too
    (Video-R1's "multiple choice", "free-form", "OCR"; "open-ended", "numeric", "mcq", ...)."""

    multiple_choice = "multiple_choice"
    numerical = "numerical"
    free_form = "free_form"
    ocr = "ocr"
    regression = "regression"
    temporal_grounding = "temporal_grounding"

    @classmethod
    def _missing_(cls, value: object) -> ProblemType | None:
        # Called by ProblemType(x) and by pydantic's validation of every `problem_type` field when
        # `x` is not a canonical value: the spellings the rewards accept (rewards/accuracy.py).
        name = problem_type_name(value) if isinstance(value, str) else None
        return cls(name) if name is not None else None


class KeyFrame(BaseModel):
    """An annotated moment: `boxes` maps an object name to a normalised [x1, y1, x2, y2] box."""

    model_config = ConfigDict(extra="forbid")
    time: float = Field(ge=0)
    boxes: dict[str, list[float]] = Field(default_factory=dict)

    @field_validator("boxes")
    @classmethod
    def _boxes_normalised(cls, boxes: dict[str, list[float]]) -> dict[str, list[float]]:
        for name, box in boxes.items():
            if len(box) != 4:
                raise ValueError(f"box of {name!r} needs 4 numbers, got {len(box)}")
            x1, y1, x2, y2 = box
            if not (0 <= x1 <= x2 <= 1 and 0 <= y1 <= y2 <= 1):
                raise ValueError(f"box of {name!r} must be normalised x1<=x2, y1<=y2 in [0, 1], got {box}")
        return boxes


class MaskPattern(BaseModel):
    """A time range to black out (DM-GRPO) and whether an oracle still answers right without it."""

    model_config = ConfigDict(extra="forbid")
    time_range: tuple[float, float]
    oracle_correct: bool

    @field_validator("time_range")
    @classmethod
    def _ordered(cls, tr: tuple[float, float]) -> tuple[float, float]:
        if not (math.isfinite(tr[0]) and math.isfinite(tr[1]) and 0 <= tr[0] <= tr[1]):
            raise ValueError(f"time_range must be finite with 0 <= start <= end, got {list(tr)}")
        return tr


REPR_MAX = 200  # characters of `repr(VideoSample)`


class VideoSample(BaseModel):
    """One video question.

    `options` are the choices as shown to the model (e.g. "A. red"); for multiple choice the
    `answer` is the option letter. `clue_intervals` are the answer-relevant spans in seconds.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    video: str = Field(min_length=1)
    question: str = Field(min_length=1)
    options: list[str] | None = None
    answer: str
    problem_type: ProblemType = ProblemType.multiple_choice
    duration: float | None = Field(default=None, gt=0)
    clue_intervals: list[tuple[float, float]] = Field(default_factory=list)
    reference_reasoning: str | None = None
    key_frames: list[KeyFrame] = Field(default_factory=list)
    mask_patterns: list[MaskPattern] = Field(default_factory=list)
    data_source: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("clue_intervals")
    @classmethod
    def _intervals_ordered(cls, intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
        for k, (s, e) in enumerate(intervals):
            if not (math.isfinite(s) and math.isfinite(e)):
                raise ValueError(f"interval {k} is not finite: {[s, e]}")
            if s < 0 or e <= s:
                raise ValueError(f"interval {k} needs 0 <= start < end, got {[s, e]}")
        return intervals

    def __repr__(self) -> str:
        """One line of at most `REPR_MAX` characters: id, problem type, question, answer, clues, video.

        A sample's full field dump (reference reasoning, key frames, metadata) runs to pages;
        `model_dump()` gives it.
        """
        def short(text: str, n: int) -> str:
            text = " ".join(str(text).split())
            return text if len(text) <= n else text[: n - 1] + "…"

        video = self.video if len(self.video) <= 40 else "…" + self.video[-39:]
        head = f"VideoSample(id={short(self.id, 40)!r}, {self.problem_type.value}, "
        tail = f", answer={short(self.answer, 24)!r}, clues={len(self.clue_intervals)}, video={video!r})"
        room = max(REPR_MAX - len(head) - len(tail) - len("question=''"), 8)
        out = head + f"question={short(self.question, room)!r}" + tail
        return out if len(out) <= REPR_MAX else out[: REPR_MAX - 2] + "…)"  # escapes may lengthen it

    __str__ = __repr__

    @model_validator(mode="after")
    def _within_duration(self) -> VideoSample:
        if self.duration is not None:
            self.check_within(self.duration)
        if self.problem_type == ProblemType.multiple_choice and not self.options:
            raise ValueError("options: a multiple_choice sample needs options")
        return self

    def check_within(self, duration: float, tolerance: float = 0.05) -> None:
        """Raise ValueError if an annotation lies beyond `duration` seconds (with a small tolerance)."""
        limit = duration + tolerance
        for k, (s, e) in enumerate(self.clue_intervals):
            if e > limit:
                raise ValueError(f"clue_intervals.{k}: end {e} is beyond the video duration {duration:.3f} s")
        for k, kf in enumerate(self.key_frames):
            if kf.time > limit:
                raise ValueError(f"key_frames.{k}.time: {kf.time} is beyond the video duration {duration:.3f} s")
        for k, mp in enumerate(self.mask_patterns):
            if mp.time_range[0] > limit:
                raise ValueError(f"mask_patterns.{k}.time_range starts beyond the video duration {duration:.3f} s")

    # ---- JSONL I/O -------------------------------------------------------------------------
    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str]) -> list[VideoSample]:
        """Read every sample of a JSONL file; relative `video` paths resolve against its folder."""
        return list(iter_jsonl(path))

    def to_json_row(self, relative_to: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """A JSON-ready dict; with `relative_to` (a folder) the video path is written relative to it."""
        row = self.model_dump(mode="json", exclude_none=False)
        if relative_to is not None:
            try:
                row["video"] = os.path.relpath(self.video, relative_to)
            except ValueError:  # different drive on Windows
                pass
        return row


def _format_validation_error(err: ValidationError) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "row"
    return f"field {field!r}: {first['msg']}"


def parse_json_line(line: str) -> Any:
    """One JSON Lines row; ValueError "invalid JSON (MSG at column N)" with N the column in the file.

    The line end is dropped first: parsed with it, an unfinished row reports its error at "line 2
    column 1" of the row instead of where the file's line ends (check-data and this API differed).
    """
    try:
        return json.loads(line.rstrip("\r\n"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON ({exc.msg} at column {exc.colno})") from None


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[VideoSample]:
    """Yield samples one by one; raises `DataError` with file, line and field on a bad row."""
    for _, sample in iter_jsonl_rows(path):
        yield sample


def iter_jsonl_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, VideoSample]]:
    """Like `iter_jsonl`, with each sample's line number (for messages about the row later)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: dataset file not found")
    base = path.resolve().parent
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = parse_json_line(line)
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: {exc}") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            try:
                sample = VideoSample.model_validate(row)
            except ValidationError as exc:
                sid = row.get("id", "?")
                raise DataError(f"{path}:{lineno} (sample {sid}): {_format_validation_error(exc)}") from None
            if sample.id in seen:
                raise DataError(f"{path}:{lineno}: duplicate sample id {sample.id!r}")
            seen.add(sample.id)
            if not os.path.isabs(sample.video):
                sample.video = os.path.normpath(base / sample.video)
            yield lineno, sample


def write_jsonl(samples: list[VideoSample], path: str | os.PathLike[str]) -> Path:
    """Write samples to `path`, video paths relative to its folder so the set can be moved."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    base = path.resolve().parent
    with path.open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s.to_json_row(relative_to=base), ensure_ascii=False) + "\n")
    return path
