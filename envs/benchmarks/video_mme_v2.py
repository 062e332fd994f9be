"""Video-MME-v2 (MME-Benchmarks/Video-MME-v2) -> `VideoSample` rows.

Source: ``test.parquet`` of the Hugging Face dataset MME-Benchmarks/Video-MME-v2, 3,200 questions,
read as github.com/MME-Benchmarks/Video-MME-v2 ``evaluation/test_video_mme_v2.py`` (commit
b24176a14506c48a9f3e156d9f20068db6c4782b) reads it: one row per question, ``video_id``,
``question``, ``options`` (eight, ``A. ...`` to ``H. ...``; the script writes ``question + "\\n" +
options``), ``answer`` (the letter), and the group fields ``level``, ``group_type`` (relevance |
logic), ``group_structure`` (``[1, 2, 3, 4]``, ``[1, [2, 3], 4]`` or ``[[1, 2], 3, 4]``),
``second_head``, ``third_head``. The script's ``index`` is the row's position, and its groups are
the rows ``4g .. 4g + 3`` in file order: the position is kept as ``metadata.benchmark.index`` and the
sample id is ``{index}`` (the script's own key).

Videos are ``{video_id}.mp4`` under ``--video-root``. Without ``--subtitles`` this is the
subtitle-free setting (the script's default); with ``--subtitles DIR`` the script's concatenated
mode: ``DIR/{video_id}.jsonl``'s words joined into ``WITH_SUB_PROMPT``, kept as
``metadata.subtitle_prompt`` and given before the first observation (`videoseek.envs.subtitles`); with ``--subtitle-mode
interleaved`` its interleaved mode: the words grouped into segments (``metadata.subtitle_segments``),
listed by the env with the frames they fall between. Video-MME-v2 has no clue intervals. `videoseek.agents.benchmarks.video_mme_v2`
scores the answers with the script's grouped non-linear rating.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from videoseek.envs.benchmarks._mc import benchmark_sample, letter, text
from videoseek.envs.convert import ConvertOptions, RowError, iter_records
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.subtitles import group_segments, read_word_jsonl, v2_concatenated_prompt

NAME = "video-mme-v2"
GROUP_TYPES = ("relevance", "logic")
GROUP_STRUCTURES = ([1, 2, 3, 4], [1, [2, 3], 4], [[1, 2], 3, 4])

FIELDS = {
    "row position": "id '{index}' (the script's index); metadata.benchmark.index, its group index // 4",
    "video_id": "video '{video_id}.mp4' under --video-root",
    "question": "question",
    "options": "options (A. ... H., one a line when written as one text)",
    "answer": "answer (the option letter)",
    "level, group_type, group_structure": "metadata.benchmark: the group rating (relevance / logic, its chain)",
    "second_head, third_head": "metadata.benchmark (the category breakdowns); second_head is metadata.task_kind",
    "everything": "metadata.benchmark (the record as written)",
}


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """The rows of the parquet / JSON / JSONL file, each with ``__index__``, its position."""
    for position, (location, record) in enumerate(iter_records(path)):
        yield location, ({**record, "__index__": position} if isinstance(record, dict) else record)


def _options(record: dict) -> list[str]:
    value = record.get("options")
    if value is not None and not isinstance(value, (list, tuple, str)) and hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        value = [line.strip() for line in value.splitlines() if line.strip()]
    if not isinstance(value, (list, tuple)) or len(value) < 2 or not all(isinstance(v, str) and v.strip() for v in value):
        raise RowError("options", f"expected the options 'A. ...' to 'H. ...', got {str(value)[:60]!r}")
    return [str(v) for v in value]


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Video-MME-v2 question -> `VideoSample` (mapping: `FIELDS`)."""
    position = int(record.get("__index__", index))
    video = text(record, "video_id")
    options = _options(record)
    answer = letter(text(record, "answer"), options, "answer")
    group_type = text(record, "group_type")
    if group_type not in GROUP_TYPES:
        raise RowError("group_type", f"expected one of {list(GROUP_TYPES)}, got {group_type!r}")
    try:
        structure = ast.literal_eval(text(record, "group_structure"))
    except (ValueError, SyntaxError):
        structure = None
    if group_type == "logic" and structure not in GROUP_STRUCTURES:
        raise RowError("group_structure", f"expected one of {[str(s) for s in GROUP_STRUCTURES]}, got {record.get('group_structure')!r}")
    second_head = record.get("second_head")
    sample = benchmark_sample(
        NAME, record, location, root,
        sample_id=str(position),
        video=video if video.lower().endswith(".mp4") else f"{video}.mp4",
        question=text(record, "question"),
        options=options,
        answer=answer,
        task_kind=str(second_head) if second_head is not None else None,
        extra={"index": position},
    )  # fmt: skip
    if opts.subtitle_dir is not None:  # the concatenated subtitle mode; a video without a file gets ""
        words = Path(opts.subtitle_dir) / f"{video[:-4] if video.lower().endswith('.mp4') else video}.jsonl"
        try:
            entries = read_word_jsonl(words) if words.is_file() else None
        except DataError as exc:
            raise RowError("subtitles", str(exc)) from None
        if opts.subtitle_mode == "interleaved":
            sample.metadata["subtitle_segments"] = group_segments(entries or [])
        else:
            sample.metadata["subtitle_prompt"] = v2_concatenated_prompt(entries)
    return sample
