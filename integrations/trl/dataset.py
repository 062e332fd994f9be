"""Samples as the dataset TRL's `GRPOTrainer` takes with an `environment_factory`.

TRL passes every column of a row to the environment's `reset(**row)`. A row is a `VideoSample`'s
fields (the video path made absolute) plus `prompt`, the conversation the env's observation is
appended to (the system prompt and an empty user turn). Nested fields (`options`,
`clue_intervals`, `key_frames`, `mask_patterns`, `metadata`) are JSON strings: Arrow would store
them as structs whose keys are unified across rows (`key_frames[*].boxes` names differ per
sample), as `training/verl_plugin/records.py` explains for verl's parquet.

Rows are validated where they are read (`videoseek.envs.iter_jsonl`): a bad row fails when the
dataset is built, with file, line and field, never inside the trainer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from videoseek.envs.protocol import SYSTEM_PROMPT
from videoseek.envs.sample import DataError, VideoSample, iter_jsonl

NESTED_FIELDS = ("options", "clue_intervals", "key_frames", "mask_patterns", "metadata")


def sample_row(sample: VideoSample) -> dict[str, Any]:
    """The sample's fields as one dataset row, nested fields as JSON strings."""
    row = sample.to_json_row()
    for name in NESTED_FIELDS:
        row[name] = json.dumps(row[name], ensure_ascii=False)
    return row


def sample_from_row(row: Mapping[str, Any]) -> VideoSample:
    """The `VideoSample` of a dataset row (inverse of `sample_row`); DataError naming the field.

    Columns that are not sample fields (`prompt`, anything a user added) are ignored.
    """
    fields = {name: row[name] for name in VideoSample.model_fields if name in row}
    for name in NESTED_FIELDS:
        if isinstance(fields.get(name), str):
            try:
                fields[name] = json.loads(fields[name])
            except ValueError as exc:
                raise DataError(f"sample {fields.get('id', '?')}: field {name!r}: not JSON ({exc})") from None
    try:
        return VideoSample.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "row"
        raise DataError(f"sample {fields.get('id', '?')}: field {field!r}: {first['msg']}") from None


def samples_dataset(path: str | os.PathLike[str], system_prompt: str | None = SYSTEM_PROMPT):
    """A `datasets.Dataset` of the samples in the JSONL file `path`, one row per sample.

    `prompt` is `[system, user ""]` (no system message with `system_prompt=None`): the env's
    `reset` appends the question and the sparse frames to the user turn. Raises DataError naming
    the file, line and field of the first bad row.
    """
    from datasets import Dataset

    prompt = ([{"role": "system", "content": system_prompt}] if system_prompt is not None else []) + [{"role": "user", "content": ""}]
    rows = [{"prompt": prompt, **sample_row(sample)} for sample in iter_jsonl(path)]
    if not rows:
        raise DataError(f"{path}: no samples")
    return Dataset.from_list(rows)
