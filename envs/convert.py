"""`videoseek convert`: turn public video-QA dataset files into VideoSeek samples (JSONL).

Four source formats, each converter documenting its mapping field by field (`FIELD_MAPS`):

- ``open-o3``   Open-o3-Video STGR records (the grounded-reasoning data that Open-o3-Video-v2,
  seed 003, builds on): ``video_path``, ``question``, ``answer``, ``reasoning_process``, ``task``,
  ``source``, ``key_frames`` ([{idx, time, path}]), ``key_items`` ({str(idx): {object: [[x1,y1,x2,y2]]}},
  boxes normalised to [0, 1]), ``image_size`` ([W, H]).
- ``video-r1``  Video-R1 records: ``problem_id``, ``problem``, ``problem_type`` (``multiple choice``,
  ``numerical``, ``OCR``, ``free-form``, ``regression``), ``options`` (["A. ...", ...]), ``solution``
  (``<answer>X</answer>``), ``process`` (CoT, SFT split only), ``path`` (``./Folder/clip.mp4``),
  ``data_type`` (``video`` or ``image``), ``data_source``. Image rows are skipped and counted.
- ``moss``      MOSS-Video-style records (MOSS-ChatV, seed 000): a question about a video with a
  reference reasoning trace, the input of the PRR process reward. MOSS-Video itself is not public;
  the accepted field names are Video-R1's plus the common aliases listed in `FIELD_MAPS["moss"]`.
- ``videomend`` VideoMend records (seed 002): Video-R1 fields plus ``mask_patterns`` —
  [{``zero_frame_indices``, ``time_range`` ("0.3 - 0.6" or [s, e], seconds), ``oracle_correct``}] —
  and a Ref-Delta trace in ``process``. Patterns without ``oracle_correct`` are kept as
  ``metadata["mask_candidates"]`` for ``videoseek annotate-masks``.

The public benchmarks are read (and scored) by `videoseek.envs.benchmarks`, one module each,
registered in its `BENCHMARKS` (the ``--from`` choices after the four above) and imported only when
chosen; they go through the same `convert_files` (docs/benchmarks.md). The reading layer both
share (`iter_records`, `RowError`, `ConvertOptions`, the field helpers) is
`videoseek.envs.source_records`; this module re-exports it.

Input files may be JSON (an array of records, or one record), JSON Lines, or parquet. Bad rows are
reported as ``FILE:LINE: field 'x': what is wrong`` (``FILE:row N`` for parquet) and skipped, the
good ones are written (exit status 0; 2 with ``--strict`` or when no row converts); fields a
converter does not know go to ``metadata`` unchanged, so nothing in the source is lost.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from videoseek.envs import benchmarks
from videoseek.envs.benchmarks import BENCHMARKS
from videoseek.envs.errors import DataError
from videoseek.envs.sample import ProblemType, VideoSample, write_jsonl
from videoseek.envs.source_records import (  # the reading layer shared with the benchmark readers; re-exported
    ConvertOptions,
    RowError,
    SkipRow,
    build_sample,
    iter_records,
    jsonable,
    mc_letter,
    option_letters,  # noqa: F401 (re-exported)
    options_from_question,
    resolve_video,
    span_field,
)
from videoseek.rewards.intervals import union
from videoseek.rewards.tags import first_block
from videoseek.rewards.timestamps import parse_time

# The training-data formats converted here, then the public benchmarks of the registry
# `videoseek.envs.benchmarks.BENCHMARKS`, whose modules are imported only when one is chosen.
TRAINING_FORMATS = ("open-o3", "video-r1", "moss", "videomend")


def formats() -> tuple[str, ...]:
    """The ``--from`` choices: the training formats, then every benchmark registered now."""
    return TRAINING_FORMATS + tuple(BENCHMARKS)


FORMATS = formats()  # as registered at import; `formats()` reads the registry each time


@dataclass
class ConvertResult:
    """Samples converted from one or more files, with what was skipped and what was bad."""

    samples: list[VideoSample] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    renamed_ids: int = 0


# ---- small field helpers -----------------------------------------------------------------------

VIDEO_R1_TYPES = {
    "multiple choice": ProblemType.multiple_choice,
    "numerical": ProblemType.numerical,
    "ocr": ProblemType.ocr,
    "free-form": ProblemType.free_form,
    "open-ended": ProblemType.free_form,  # EasyVideoR1's name for free-form
    "regression": ProblemType.regression,
    "temporal grounding": ProblemType.temporal_grounding,
}
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")


def _text(record: dict, key: str, required: bool = True) -> str | None:
    value = record.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise RowError(key, "missing or empty")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise RowError(key, f"expected text, got {type(value).__name__}")
    return value


def _first_key(record: dict, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` present with a non-empty value."""
    for key in keys:
        value = record.get(key)
        if value is not None and value != "" and value != []:
            return key
    return None


def answer_from_solution(solution: str) -> str:
    """The text inside ``<answer>…</answer>`` (Video-R1's `solution`), or the stripped text."""
    found = first_block(solution, "answer")
    return (solution if found is None else found).strip()


def reasoning_from_process(process: str | None) -> str | None:
    """The text inside ``<think>…</think>`` (Video-R1's `process`), or the stripped text; None if empty."""
    if process is None:
        return None
    found = first_block(process, "think")
    text = (process if found is None else found).strip()
    return text or None


def _extras(record: dict, known: set[str]) -> dict[str, Any]:
    return {k: jsonable(v) for k, v in record.items() if k not in known}


def _duration(record: dict) -> float | None:
    value = record.get("duration")
    if value is None:
        return None
    d = parse_time(value)
    if d is None or d <= 0:
        raise RowError("duration", f"expected positive seconds, got {value!r}")
    return d


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text.replace(",", "")))
    except ValueError:
        return False


# ---- Video-R1 ----------------------------------------------------------------------------------
VIDEO_R1_FIELDS = {
    "problem_id": "id (as text; `id` wins when present)",
    "problem": "question",
    "problem_type": "problem_type (multiple choice, numerical, OCR, free-form, regression)",
    "options": "options (an empty list becomes None)",
    "solution": "answer (the text inside <answer>…</answer>)",
    "process": "reference_reasoning (the text inside <think>…</think>)",
    "path": "video (leading './' dropped, joined to --video-root)",
    "data_type": "rows with 'image' are skipped and counted",
    "data_source": "data_source",
    "duration": "duration (when present)",
}


def _video_r1_core(record: dict, index: int, opts: ConvertOptions, root: str, fmt: str) -> dict[str, Any]:
    """The Video-R1 mapping shared by the video-r1, moss and videomend converters."""
    path_key = _first_key(record, ("path", "video", "videos", "video_path"))
    if path_key is None:
        raise RowError("path", "missing video path")
    path_value = record[path_key]
    if isinstance(path_value, list):  # EasyVideoR1 / dataflow style: a one-element list
        if len(path_value) != 1:
            raise RowError(path_key, f"expected one video, got {len(path_value)}")
        path_value = path_value[0]
    if not isinstance(path_value, str):
        raise RowError(path_key, f"expected a path, got {type(path_value).__name__}")
    data_type = str(record.get("data_type") or "").lower()
    if data_type == "image" or (not data_type and path_value.lower().endswith(IMAGE_SUFFIXES)):
        raise SkipRow("image-only row")
    if data_type and data_type != "video":
        raise RowError("data_type", f"expected 'video' or 'image', got {record.get('data_type')!r}")
    q_key = _first_key(record, ("problem", "question")) or "problem"
    question = _text(record, q_key)
    raw_type = str(record.get("problem_type") or "").strip()
    options = record.get("options") or None
    if options is not None:
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            raise RowError("options", "expected a list of option strings")
    if raw_type:
        ptype = VIDEO_R1_TYPES.get(raw_type.lower())
        if ptype is None:
            try:
                ptype = ProblemType(raw_type)
            except ValueError:
                known = sorted(set(VIDEO_R1_TYPES))
                raise RowError("problem_type", f"unknown problem type {raw_type!r} (known: {known})") from None
    else:
        ptype = ProblemType.multiple_choice if options else ProblemType.free_form
    a_key = _first_key(record, ("solution", "answer")) or "solution"
    answer = answer_from_solution(_text(record, a_key))
    if ptype == ProblemType.multiple_choice:
        if not options:
            question, options = options_from_question(question)
        if not options:
            raise RowError("options", "a multiple choice problem needs options")
        answer = mc_letter(answer, options, a_key)
    elif ptype in (ProblemType.numerical, ProblemType.regression):
        if not _is_number(answer):
            raise RowError(a_key, f"{ptype.value} answer is not a number: {answer!r}")
    rid = record.get("id", record.get("problem_id"))
    sample_id = str(rid) if rid is not None and str(rid).strip() else f"{fmt}-{index}"
    r_key = _first_key(record, ("process", "reasoning", "reference_reasoning", "reasoning_process"))
    return {
        "id": sample_id,
        "video": resolve_video(path_value, root),
        "question": question,
        "options": options,
        "answer": answer,
        "problem_type": ptype.value,
        "duration": _duration(record),
        "reference_reasoning": reasoning_from_process(_text(record, r_key, required=False)) if r_key else None,
        "data_source": str(record.get("data_source") or fmt),
        "_used": {path_key, q_key, a_key, r_key, "problem_type", "options", "data_type", "data_source", "id",
                  "problem_id", "duration"} - {None},
    }


def _finish(row: dict[str, Any], record: dict, location: str, fmt: str) -> VideoSample:
    used = row.pop("_used")
    metadata = _extras(record, used)
    metadata.update(row.pop("metadata", {}))
    metadata["converted_from"] = f"{fmt}:{location}"
    row["metadata"] = metadata
    return build_sample(row)


def convert_video_r1(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Video-R1 record -> `VideoSample` (mapping: `VIDEO_R1_FIELDS`)."""
    row = _video_r1_core(record, index, opts, root, "video-r1")
    return _finish(row, record, location, "video-r1")


# ---- MOSS-Video style --------------------------------------------------------------------------
MOSS_FIELDS = {
    "id | qid | problem_id": "id",
    "video | video_path | path": "video (joined to --video-root)",
    "question | problem": "question",
    "options": "options (None for open questions)",
    "answer | solution": "answer (<answer> tags stripped)",
    "reasoning | reference_reasoning | process | reasoning_process": "reference_reasoning (required; <think> tags stripped)",
    "problem_type": "problem_type (default: multiple choice with options, else free form)",
    "clue_intervals": "clue_intervals ([s, e] spans in any time format)",
    "duration": "duration",
    "data_source": "data_source (default 'moss')",
    "anything else (e.g. object-state triplets)": "metadata",
}


def convert_moss(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One MOSS-Video-style record -> `VideoSample` (mapping: `MOSS_FIELDS`)."""
    if "id" not in record and "qid" in record:
        record = {**record, "id": record["qid"]}
    row = _video_r1_core(record, index, opts, root, "moss")
    row["_used"].add("qid")
    if not row["reference_reasoning"]:
        raise RowError("reasoning", "a MOSS-style record needs a reference reasoning trace")
    if record.get("clue_intervals"):
        spans = record["clue_intervals"]
        if not isinstance(spans, list):
            raise RowError("clue_intervals", "expected a list of [start, end] spans")
        row["clue_intervals"] = union(span_field(s, f"clue_intervals.{k}") for k, s in enumerate(spans))
        row["_used"].add("clue_intervals")
    return _finish(row, record, location, "moss")


# ---- VideoMend ---------------------------------------------------------------------------------
VIDEOMEND_FIELDS = {
    **VIDEO_R1_FIELDS,
    "process | reasoning": "reference_reasoning (the Ref-Delta trace)",
    "mask_patterns[k].time_range": "mask_patterns[k].time_range (\"s - e\" or [s, e], seconds)",
    "mask_patterns[k].oracle_correct": "mask_patterns[k].oracle_correct; patterns without it -> metadata.mask_candidates",
    "mask_patterns[k].zero_frame_indices": "metadata.mask_zero_frame_indices[k] (indices into VideoMend's own frame sampling)",
}


def _bool(value: Any, field_name: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise RowError(field_name, f"expected true or false, got {value!r}")


def convert_videomend(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One VideoMend record -> `VideoSample` (mapping: `VIDEOMEND_FIELDS`)."""
    row = _video_r1_core(record, index, opts, root, "videomend")
    patterns, candidates, zero_indices = [], [], []
    raw = record.get("mask_patterns") or []
    if not isinstance(raw, list):
        raise RowError("mask_patterns", "expected a list")
    for k, pat in enumerate(raw):
        if not isinstance(pat, dict):
            raise RowError(f"mask_patterns.{k}", "expected an object")
        if pat.get("time_range") is None:
            raise RowError(f"mask_patterns.{k}.time_range", "missing")
        span = span_field(pat["time_range"], f"mask_patterns.{k}.time_range")
        if pat.get("oracle_correct") is None:
            candidates.append(list(span))
        else:
            patterns.append({"time_range": span, "oracle_correct": _bool(pat["oracle_correct"], f"mask_patterns.{k}.oracle_correct")})
        zero_indices.append(pat.get("zero_frame_indices"))
    row["mask_patterns"] = patterns
    row["metadata"] = {}
    if candidates:
        row["metadata"]["mask_candidates"] = candidates
    if any(z is not None for z in zero_indices):
        row["metadata"]["mask_zero_frame_indices"] = zero_indices
    row["_used"].add("mask_patterns")
    return _finish(row, record, location, "videomend")


# ---- Open-o3-Video STGR ------------------------------------------------------------------------
OPEN_O3_FIELDS = {
    "id": "id (default 'open-o3-<record number>')",
    "video_path": "video (joined to --video-root; with Open-o3's DATA_ROOT layout the folder follows `source`)",
    "image_path": "rows with an image and no video ('visual QA') are skipped and counted",
    "question": "question (trailing 'A. ...' lines become options for the MCQ tasks)",
    "answer": "answer; 'temporal QA': '[s, e]' -> clue_intervals and a temporal_grounding answer; "
    "'temporal QA (MCQ)': 'A\\n[s, e]' -> letter answer + clue_intervals",
    "reasoning_process": "reference_reasoning",
    "task": "problem_type (see OPEN_O3_TASKS) and metadata.task_kind",
    "source": "data_source",
    "key_frames[k].time": "key_frames[k].time; without an explicit span, clue_intervals = windows of "
    "--keyframe-window seconds around the key frames",
    "key_frames[k].idx + key_items[str(idx)]": "key_frames[k].boxes {object: [x1,y1,x2,y2]} normalised; "
    "pixel boxes are divided by image_size; an object's 2nd, 3rd box are named 'object#2', ...",
    "key_frames[k].path": "metadata.key_frame_paths (Open-o3's extracted key-frame images)",
    "image_size": "[W, H], used only to normalise pixel boxes",
}

OPEN_O3_TASKS = {
    "temporal-spatial free-form QA": ProblemType.free_form,
    "temporal QA": ProblemType.temporal_grounding,
    "temporal QA (MCQ)": ProblemType.multiple_choice,
    "General video QA MCQ": ProblemType.multiple_choice,
    "General video QA Free-form": ProblemType.free_form,
}

# Open-o3-Video's DATA_ROOT layout: video folder by `source` (its grpo_trainer.py), first match wins.
OPEN_O3_SOURCE_DIRS = (
    ("videoespresso_train_video", "videos/videoespresso/videos"),
    ("timerft", "videos/timerft"),
    ("STR_plm", "videos/stgr/plm/videos"),
    ("STR", "videos/stgr/temporal_grounding/videos"),
    ("TVG", "videos/tvg_r1"),
    ("videor1", "videos/videor1"),
)

# A box coordinate this far outside [0, 1] is rounding noise and is clamped; beyond, it is an error.
BOX_TOLERANCE = 1e-3


def open_o3_video_root(root: str, source: str) -> str:
    """The folder of a record's video: `root/<dir for source>` under Open-o3's DATA_ROOT layout
    (a `videos/` folder in `root`), else `root` itself."""
    if os.path.isdir(os.path.join(root, "videos")):
        for key, sub in OPEN_O3_SOURCE_DIRS:
            if key in source:
                return os.path.join(root, sub)
    return root


def normalise_box(box: Any, image_size: Any, field_name: str) -> list[float]:
    """A normalised [x1, y1, x2, y2]; pixel boxes (a coordinate > 1) are divided by [W, H]."""
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        raise RowError(field_name, f"expected [x1, y1, x2, y2], got {box!r}")
    try:
        coords = [float(c) for c in box]
    except (TypeError, ValueError):
        raise RowError(field_name, f"box has a non-number: {box!r}") from None
    if not all(math.isfinite(c) for c in coords):
        raise RowError(field_name, f"box has a non-finite number: {box!r}")
    if max(coords) > 1 + BOX_TOLERANCE:
        if not image_size or len(image_size) != 2 or min(float(v) for v in image_size) <= 0:
            raise RowError(field_name, f"box {box} is in pixels but the record has no image_size [W, H]")
        w, h = float(image_size[0]), float(image_size[1])
        coords = [coords[0] / w, coords[1] / h, coords[2] / w, coords[3] / h]
    if min(coords) < -BOX_TOLERANCE or max(coords) > 1 + BOX_TOLERANCE:
        raise RowError(field_name, f"box {box} lies outside the image")
    x1, y1, x2, y2 = (min(max(c, 0.0), 1.0) for c in coords)
    if x1 > x2 or y1 > y2:
        raise RowError(field_name, f"box {box} needs x1 <= x2 and y1 <= y2")
    return [x1, y1, x2, y2]


def _open_o3_key_frames(record: dict) -> tuple[list[dict], list[str]]:
    """Key frames with their boxes, and the key-frame image paths (None entries of key_items —
    parquet/`datasets` fill absent struct keys with None — are dropped, as Open-o3's trainer does)."""
    frames = record.get("key_frames") or []
    items = record.get("key_items") or {}
    if not isinstance(frames, list):
        raise RowError("key_frames", "expected a list")
    if not isinstance(items, dict):
        raise RowError("key_items", "expected an object keyed by key-frame idx")
    out, paths = [], []
    for k, kf in enumerate(frames):
        if not isinstance(kf, dict) or kf.get("time") is None:
            raise RowError(f"key_frames.{k}", "expected {idx, time}")
        t = parse_time(kf["time"])
        if t is None or t < 0:
            raise RowError(f"key_frames.{k}.time", f"expected seconds >= 0, got {kf['time']!r}")
        boxes: dict[str, list[float]] = {}
        objects = items.get(str(kf.get("idx"))) or {}
        if not isinstance(objects, dict):
            raise RowError(f"key_items.{kf.get('idx')}", "expected {object: boxes}")
        for name, obj_boxes in objects.items():
            if obj_boxes is None:
                continue
            if obj_boxes and not isinstance(obj_boxes[0], (list, tuple)):
                obj_boxes = [obj_boxes]  # a single box written flat
            for j, box in enumerate(obj_boxes):
                label = name if j == 0 else f"{name}#{j + 1}"
                boxes[label] = normalise_box(box, record.get("image_size"), f"key_items.{kf.get('idx')}.{name}")
        out.append({"time": t, "boxes": boxes})
        if kf.get("path"):
            paths.append(str(kf["path"]))
    return out, paths


def convert_open_o3(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One Open-o3-Video STGR record -> `VideoSample` (mapping: `OPEN_O3_FIELDS`)."""
    task = _text(record, "task")
    if task == "visual QA" or (not record.get("video_path") and record.get("image_path")):
        raise SkipRow("image-only row")
    ptype = OPEN_O3_TASKS.get(task)
    if ptype is None:
        raise RowError("task", f"unknown task {task!r} (known: {sorted(OPEN_O3_TASKS)})")
    source = str(record.get("source") or "open-o3")
    video = resolve_video(_text(record, "video_path"), open_o3_video_root(root, source))
    question = _text(record, "question")
    answer_text = _text(record, "answer").strip()
    options, clues, answer = None, [], answer_text
    if task == "temporal QA":
        span = span_field(answer_text, "answer")
        clues, answer = [span], json.dumps(list(span))
    elif task == "temporal QA (MCQ)":
        head, _, tail = answer_text.partition("\n")
        answer = head.strip()
        clues = [span_field(tail.strip(), "answer")]
    if ptype == ProblemType.multiple_choice:
        question, options = options_from_question(question)
        if not options:
            raise RowError("question", "a multiple-choice task needs 'A. ...' option lines in the question")
        answer = mc_letter(answer, options)
    key_frames, kf_paths = _open_o3_key_frames(record)
    if not clues and key_frames:
        half = opts.keyframe_window / 2
        clues = union((max(0.0, kf["time"] - half), kf["time"] + half) for kf in key_frames)
    metadata: dict[str, Any] = {"task_kind": task}
    if kf_paths:
        metadata["key_frame_paths"] = kf_paths
    rid = record.get("id")
    row = {
        "id": str(rid) if rid is not None and str(rid).strip() else f"open-o3-{index}",
        "video": video,
        "question": question,
        "options": options,
        "answer": answer,
        "problem_type": ptype.value,
        "duration": _duration(record),
        "clue_intervals": clues,
        "reference_reasoning": (_text(record, "reasoning_process", required=False) or "").strip() or None,
        "key_frames": key_frames,
        "data_source": source,
        "metadata": metadata,
        "_used": {"id", "task", "source", "video_path", "image_path", "question", "answer", "reasoning_process",
                  "key_frames", "key_items", "image_size", "duration"},
    }
    return _finish(row, record, location, "open-o3")


Converter = Callable[[dict, int, str, ConvertOptions, str], VideoSample]
CONVERTERS: dict[str, Converter] = {
    "open-o3": convert_open_o3,
    "video-r1": convert_video_r1,
    "moss": convert_moss,
    "videomend": convert_videomend,
}


def benchmark_module(fmt: str) -> Any:
    """The converter module of benchmark `fmt`, imported now; `DataError` (one line) when it is
    unknown or cannot be imported."""
    try:
        return benchmarks.benchmark_module(fmt)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    except ImportError as exc:
        raise DataError(f"benchmark {fmt!r}: its converter module cannot be imported ({exc})") from None


class _FieldMaps(Mapping):
    """`FIELD_MAPS[fmt]`: the training formats' mappings, and each benchmark's `FIELDS`, read from
    its module on first use (so listing or showing one mapping imports no other benchmark)."""

    def __init__(self, base: dict[str, dict[str, str]]) -> None:
        self._maps = dict(base)

    def __getitem__(self, fmt: str) -> dict[str, str]:
        if fmt not in self._maps:
            if fmt not in BENCHMARKS:
                raise KeyError(fmt)
            self._maps[fmt] = dict(benchmark_module(fmt).FIELDS)
        return self._maps[fmt]

    def __iter__(self) -> Iterator[str]:
        return iter(formats())

    def __len__(self) -> int:
        return len(formats())

    def __contains__(self, fmt: object) -> bool:
        return fmt in formats()


FIELD_MAPS: Mapping[str, dict[str, str]] = _FieldMaps({
    "open-o3": OPEN_O3_FIELDS,
    "video-r1": VIDEO_R1_FIELDS,
    "moss": MOSS_FIELDS,
    "videomend": VIDEOMEND_FIELDS,
})


def converter_for(fmt: str) -> tuple[Converter, Callable[[str | os.PathLike[str]], Iterator[tuple[str, Any]]]]:
    """(record converter, file reader) of format `fmt`: a benchmark module's `convert_record` and
    its `iter_source_records` when it has one (else `iter_records`, as for the training formats)."""
    if fmt in CONVERTERS:
        return CONVERTERS[fmt], iter_records
    if fmt in BENCHMARKS:
        module = benchmark_module(fmt)
        return module.convert_record, getattr(module, "iter_source_records", iter_records)
    raise DataError(f"unknown format {fmt!r}; choose one of {', '.join(formats())}")


# ---- whole files -------------------------------------------------------------------------------
def convert_files(
    paths: list[str | os.PathLike[str]],
    fmt: str,
    options: ConvertOptions | None = None,
    strict: bool = False,
    limit: int | None = None,
    progress: bool = False,
) -> ConvertResult:
    """Convert every record of `paths` with the `fmt` converter.

    Bad rows go to `result.errors` as one line each (``FILE:LINE: field 'x': ...``); with `strict`
    the first one raises `DataError` instead. Image-only rows are counted in `result.skipped`. Ids
    stay unique: a repeated id gets ``-<record number>`` appended (counted in `renamed_ids`).
    An input may be a folder when the format's reader takes one (VideoMMMU's download); relative
    video paths are joined to `options.video_root`, else to the input's folder (a folder input:
    the folder itself).
    """
    convert, read = converter_for(fmt)
    options = options or ConvertOptions()
    result = ConvertResult()
    seen: set[str] = set()
    index = 0
    for path in paths:
        resolved = Path(path).resolve()
        root = options.video_root or str(resolved if resolved.is_dir() else resolved.parent)
        records = read(path)
        if progress:
            from tqdm import tqdm

            records = tqdm(records, desc=f"convert {Path(path).name}", unit="row")
        for location, record in records:
            if limit is not None and len(result.samples) >= limit:
                return result
            index += 1
            try:
                if isinstance(record, RowError):
                    raise record
                if not isinstance(record, dict):
                    raise RowError("row", f"expected a JSON object, got {type(record).__name__}")
                sample = convert(record, index, location, options, root)
            except SkipRow as skip:
                result.skipped[skip.reason] += 1
                continue
            except RowError as err:
                message = f"{location}: {err}"
                if strict:
                    raise DataError(message) from None
                result.errors.append(message)
                continue
            if sample.id in seen:
                sample.id = f"{sample.id}-{index}"
                result.renamed_ids += 1
            seen.add(sample.id)
            result.samples.append(sample)
    return result


# ---- CLI ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="IN", help="JSON, JSONL or parquet file(s) of the source format "
                        "(a benchmark's own annotation files, e.g. Charades-STA's .txt; VideoMMMU: the downloaded dataset folder)")
    parser.add_argument("--from", dest="fmt", required=True, choices=formats(),
                        help="source format: a training set or a benchmark (docs/benchmarks.md)")
    parser.add_argument("--out", required=True, help="samples.jsonl to write (video paths relative to its folder)")
    parser.add_argument("--video-root", default=None, help="folder relative video paths are joined to (default: each input's folder)")
    parser.add_argument("--keyframe-window", type=float, default=1.0, help="open-o3: seconds of clue interval around each key frame (default 1.0)")
    parser.add_argument("--subtitles", default=None, metavar="DIR",
                        help="a benchmark's with-subtitles setting: the folder of its subtitles or transcripts (--show-mapping "
                        "names the files; docs/benchmarks.md)")
    parser.add_argument("--subtitle-mode", choices=("concatenated", "interleaved"), default=None,
                        help="video-mme-v2 with --subtitles: the script's two modes (default concatenated)")
    parser.add_argument("--strict", action="store_true", help="stop at the first bad row")
    parser.add_argument("--limit", type=int, default=None, help="convert at most this many samples")
    parser.add_argument("--show-mapping", action="store_true", help="print the field mapping of --from and exit")


def run(args: argparse.Namespace) -> int:
    if args.show_mapping:
        for src, dst in FIELD_MAPS[args.fmt].items():
            print(f"{src:45s} -> {dst}")
        return 0
    if args.keyframe_window <= 0:
        raise DataError(f"--keyframe-window must be > 0, got {args.keyframe_window}")
    if args.subtitles is not None and not (args.fmt in BENCHMARKS and getattr(benchmark_module(args.fmt), "SUBTITLES", None)):
        names = benchmarks.subtitled_benchmarks()
        raise DataError(f"--subtitles goes with --from {', '.join(names[:-1])} or {names[-1]}, not {args.fmt}")
    if args.subtitles is not None and not Path(args.subtitles).is_dir():
        raise DataError(f"--subtitles: {args.subtitles}: not a folder")
    if args.subtitle_mode is not None and (args.fmt != "video-mme-v2" or args.subtitles is None):
        raise DataError("--subtitle-mode goes with --from video-mme-v2 and --subtitles DIR")
    opts = ConvertOptions(video_root=args.video_root, keyframe_window=args.keyframe_window, subtitle_dir=args.subtitles,
                          subtitle_mode=args.subtitle_mode or "concatenated")
    result = convert_files(args.inputs, args.fmt, opts, strict=args.strict, limit=args.limit, progress=True)
    for line in result.errors:
        print(line, file=sys.stderr)
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(result.skipped.items())) or "none"
    if not result.samples:  # an empty output would only hide the failure from the next step
        raise DataError(f"no row converted ({len(result.errors)} bad rows, skipped: {skipped}); {args.out} not written")
    write_jsonl(result.samples, args.out)
    print(f"wrote {len(result.samples)} samples to {args.out}; skipped: {skipped}; "
          f"bad rows: {len(result.errors)}; renamed duplicate ids: {result.renamed_ids}")
    # Bad rows are named above and dropped; the good ones are a usable dataset (--strict for 2).
    return 0
