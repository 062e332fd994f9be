"""Samples as the dataset TRL's `GRPOTrainer` takes with an `environment_factory`.

TRL passes every column of a row to the environment's `reset(**row)`. A row is a `VideoSample`'s
fields (the video path made absolute) plus `prompt`, the conversation the env's observation is
appended to (the system prompt of the env's tools and an empty user turn; TRL adds the tools'
schemas itself, from `VideoSeekTRLEnv`'s methods). Nested fields (`options`,
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

from videoseek.envs.sample import DataError, VideoSample, iter_jsonl
from videoseek.envs.tools import system_prompt as tools_system_prompt

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


def samples_dataset(path: str | os.PathLike[str], config: Any = None, system_prompt: str | bool | None = True):
    """A `datasets.Dataset` of the samples in the JSONL file `path`, one row per sample.

    `prompt` is `[system, user ""]`: the env's `reset` appends the question and the sparse frames
    to the user turn. The system prompt is the one the env gives for `config`'s tools (an
    `EnvConfig`, a list of tool names or import paths, or None: the default tools), the same
    `EnvConfig` as `environment_factory`'s, so the prompt teaches the tools TRL offers; a string
    replaces it, and None (or False) leaves the system message out. Raises DataError naming the
    file, line and field of the first bad row.
    """
    from datasets import Dataset

    if system_prompt is True:
        from videoseek.envs.env import EnvConfig

        # EnvConfig reads the tool list as the env will (None/True: the default tools, False: none)
        system_prompt = tools_system_prompt(EnvConfig(tools=getattr(config, "tools", config)).tools)
    prompt = ([{"role": "system", "content": system_prompt}] if isinstance(system_prompt, str) else []) + [{"role": "user", "content": ""}]
    rows = [{"prompt": prompt, **sample_row(sample)} for sample in iter_jsonl(path)]
    if not rows:
        raise DataError(f"{path}: no samples")
    return Dataset.from_list(rows)
