"""`videoseek check-data`: validate a samples JSONL file and its videos, and describe the set.

Every row is checked (not just up to the first bad one): JSON, the `VideoSample` schema, unique
ids, and the video — it must open, a spread of its frames must decode (every frame with
``--decode-all``: a file with damaged packets opens fine and fails only where they are), and its
duration must agree with the row's `duration` and hold every annotation
(`VideoSample.check_within`). Bad rows are reported as ``FILE:LINE (sample ID): what is wrong``;
the exit status is 2 when there is one, as for every other bad input.

Statistics: durations, clue-interval lengths and coverage, problem types, data sources, which
annotations are present, and how *seek-worthy* the set is: the share of samples whose clue
intervals the env's sparse initial frames miss entirely (Open-o3-Video-v2, seed 003, keeps for
its multi-turn data only questions that eight sparse frames do not already solve). The sparse
frames are the env's: segment centres ``(k + 0.5) * duration / n``, k = 0..n-1 (`VideoSeekEnv.reset`).

``--fix-durations`` rewrites the file with every duration read from its video; annotation ends
that overshoot the video by at most ``--overshoot`` seconds (rounding in the source data, or a
key-frame window at the very end) are clipped to it and counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from videoseek.envs.sample import DataError, VideoSample, parse_json_line
from videoseek.envs.video import BACKENDS, DEFAULT_BACKEND
from videoseek.rewards.intervals import measure, union

# Declared and decoded durations may differ by container rounding; beyond this they disagree.
DURATION_TOLERANCE_S = 0.5
DURATION_TOLERANCE_REL = 0.02
# Frames decoded per video without --decode-all, evenly spread from the first to the last: cheap
# (a seek each) and enough to find a cut tail or a damaged stretch of a few GOPs.
CHECK_FRAMES = 16


def sparse_times(duration: float, n: int) -> np.ndarray:
    """The env's initial frame times: centres of `n` equal segments of [0, duration]."""
    return (np.arange(n) + 0.5) * duration / n if n > 0 else np.zeros(0)


def sparse_frames_miss(clue_intervals: list[tuple[float, float]], duration: float, n: int = 8) -> bool:
    """True when none of the `n` sparse frame times falls inside any clue interval (closed).

    >>> sparse_frames_miss([(0.0, 1.0)], 16.0, 8)   # frames at 1, 3, 5, ... s
    False
    >>> sparse_frames_miss([(1.2, 2.8)], 16.0, 8)
    True
    """
    times = sparse_times(duration, n)
    return not any(((times >= s) & (times <= e)).any() for s, e in clue_intervals)


def durations_agree(declared: float, decoded: float) -> bool:
    return abs(declared - decoded) <= max(DURATION_TOLERANCE_S, DURATION_TOLERANCE_REL * decoded)


@dataclass
class CheckResult:
    """What `check_dataset` found: valid samples, bad rows, fixes, and the raw rows for rewriting."""

    path: Path
    samples: list[VideoSample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    video_durations: dict[str, float] = field(default_factory=dict)
    fixed_durations: int = 0
    clipped_annotations: int = 0


def _schema_error(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"field {'.'.join(str(p) for p in first['loc']) or 'row'!r}: {first['msg']}"


def _clip_overshoot(row: dict[str, Any], duration: float, overshoot: float) -> int:
    """Clip annotation ends in (duration, duration + overshoot] to `duration`; returns how many."""
    clipped = 0
    limit = duration + overshoot

    def clip_end(span: Any) -> Any:
        nonlocal clipped
        if isinstance(span, (list, tuple)) and len(span) == 2 and all(isinstance(v, (int, float)) for v in span):
            if duration < span[1] <= limit and span[0] < duration:
                clipped += 1
                return [span[0], duration]
        return span

    if isinstance(row.get("clue_intervals"), list):
        row["clue_intervals"] = [clip_end(s) for s in row["clue_intervals"]]
    for pat in row.get("mask_patterns") or []:
        if isinstance(pat, dict) and "time_range" in pat:
            pat["time_range"] = clip_end(pat["time_range"])
    for kf in row.get("key_frames") or []:
        if isinstance(kf, dict) and isinstance(kf.get("time"), (int, float)) and duration < kf["time"] <= limit:
            kf["time"] = duration
            clipped += 1
    return clipped


def check_dataset(
    path: str | os.PathLike[str],
    *,
    check_videos: bool = True,
    fix_durations: bool = False,
    overshoot: float = 0.5,
    backend: str = DEFAULT_BACKEND,
    progress: bool = False,
    decode_all: bool = False,
) -> CheckResult:
    """Validate every row of `path` (and its video unless `check_videos` is False).

    With `fix_durations` each row's `duration` is replaced by the video's before validation, and
    annotation ends within `overshoot` seconds past the end are clipped. Videos are opened once
    each (rows often share a video); `CHECK_FRAMES` frames of each are decoded, or all of them
    with `decode_all`.
    """
    from videoseek.envs.video import open_video

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: dataset file not found")
    result = CheckResult(path=path)
    base = path.resolve().parent
    probe_errors: dict[str, str] = {}
    seen: dict[str, int] = {}
    # Lines as `iter_jsonl` reads them (str.splitlines would also split at U+2028 and friends,
    # which JSON strings may hold raw), so line numbers and columns agree with the API's.
    with path.open(encoding="utf-8") as fh:
        lines = list(fh)
    numbered = enumerate(lines, start=1)
    if progress:
        from tqdm import tqdm

        numbered = tqdm(numbered, total=len(lines), desc=f"check {path.name}", unit="row")
    for lineno, line in numbered:
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = parse_json_line(line)
        except ValueError as exc:
            result.errors.append(f"{where}: {exc}")
            continue
        if not isinstance(row, dict):
            result.errors.append(f"{where}: expected a JSON object, got {type(row).__name__}")
            continue
        sid = row.get("id", "?")
        where = f"{where} (sample {sid})"
        video = row.get("video")
        video_path = str(base / video) if isinstance(video, str) and video and not os.path.isabs(video) else video
        decoded: float | None = None
        if check_videos and isinstance(video_path, str) and video_path:
            if video_path not in result.video_durations and video_path not in probe_errors:
                try:
                    reader = open_video(video_path, backend)
                    n = reader.num_frames
                    reader.verify_frames(None if decode_all else np.linspace(0, n - 1, min(n, CHECK_FRAMES)).round())
                    result.video_durations[video_path] = float(reader.duration)
                except DataError as exc:
                    probe_errors[video_path] = str(exc)
            if video_path in probe_errors:
                result.errors.append(f"{where}: field 'video': {probe_errors[video_path]}")
                continue
            decoded = result.video_durations[video_path]
            if fix_durations:
                if row.get("duration") != decoded:
                    result.fixed_durations += 1
                row["duration"] = decoded
                result.clipped_annotations += _clip_overshoot(row, decoded, overshoot)
        try:
            sample = VideoSample.model_validate(row)
        except ValidationError as exc:
            result.errors.append(f"{where}: {_schema_error(exc)}")
            continue
        if sample.id in seen:
            result.errors.append(f"{where}: duplicate sample id {sample.id!r} (first on line {seen[sample.id]})")
            continue
        seen[sample.id] = lineno
        if decoded is not None:
            if sample.duration is not None and not durations_agree(sample.duration, decoded):
                result.errors.append(
                    f"{where}: field 'duration': {sample.duration:g} s but the video lasts {decoded:.3f} s (use --fix-durations)"
                )
                continue
            try:
                sample.check_within(decoded)
            except ValueError as exc:
                result.errors.append(f"{where}: {exc}")
                continue
            if sample.duration is None:
                sample.duration = decoded
        if isinstance(video_path, str):
            sample.video = video_path
        result.samples.append(sample)
        result.rows.append((lineno, row))
    return result


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": min(values),
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "max": max(values),
    }


def dataset_statistics(samples: list[VideoSample], sparse_frames: int = 8) -> dict[str, Any]:
    """Counts and distributions of a list of samples (durations must be filled for the duration
    and seek-worthiness figures; samples without one are left out of those and counted)."""
    durations = [s.duration for s in samples if s.duration]
    clue_lengths = [e - s for smp in samples for s, e in smp.clue_intervals]
    with_clues = [s for s in samples if s.clue_intervals and s.duration]
    coverage = [measure(s.clue_intervals) / s.duration for s in with_clues]
    missed = [s for s in with_clues if sparse_frames_miss(union(s.clue_intervals), s.duration, sparse_frames)]
    oracle = [p.oracle_correct for s in samples for p in s.mask_patterns]
    return {
        "samples": len(samples),
        "without_duration": len(samples) - len(durations),
        "duration_s": _summary(durations),
        "total_hours": sum(durations) / 3600,
        "clue_intervals": {
            "samples_with": sum(1 for s in samples if s.clue_intervals),
            "count": len(clue_lengths),
            "length_s": _summary(clue_lengths),
            "share_of_duration": _summary(coverage),
        },
        "problem_types": dict(Counter(s.problem_type.value for s in samples).most_common()),
        "data_sources": dict(Counter(s.data_source or "(none)" for s in samples).most_common()),
        "annotations": {
            "reference_reasoning": sum(1 for s in samples if s.reference_reasoning),
            "key_frames": sum(1 for s in samples if s.key_frames),
            "boxes": sum(len(k.boxes) for s in samples for k in s.key_frames),
            "mask_patterns": len(oracle),
            "mask_oracle_correct": sum(oracle),
        },
        "seek_worthy": {
            "sparse_frames": sparse_frames,
            "samples_with_clues": len(with_clues),
            "missed_by_sparse_frames": len(missed),
            "share": len(missed) / len(with_clues) if with_clues else None,
        },
    }


def _fmt(summary: dict[str, float] | None, unit: str = "s") -> str:
    if summary is None:
        return "n/a"
    return "  ".join(f"{k} {v:.2f}{unit}" for k, v in summary.items())


def format_statistics(stats: dict[str, Any]) -> str:
    """A plain-text report of `dataset_statistics`."""
    clues, seek, ann = stats["clue_intervals"], stats["seek_worthy"], stats["annotations"]
    share = "n/a" if seek["share"] is None else f"{100 * seek['share']:.1f}%"
    lines = [
        f"samples            {stats['samples']}  ({stats['without_duration']} without a duration)",
        f"duration           {_fmt(stats['duration_s'])}  total {stats['total_hours']:.2f} h",
        f"clue intervals     {clues['count']} in {clues['samples_with']} samples",
        f"  length           {_fmt(clues['length_s'])}",
        f"  share of video   {_fmt(clues['share_of_duration'], unit='')}",
        "problem types      " + ", ".join(f"{k} {v}" for k, v in stats["problem_types"].items()),
        "data sources       " + ", ".join(f"{k} {v}" for k, v in list(stats["data_sources"].items())[:10]),
        f"annotations        reference reasoning {ann['reference_reasoning']}, key frames {ann['key_frames']} "
        f"({ann['boxes']} boxes), mask patterns {ann['mask_patterns']} ({ann['mask_oracle_correct']} oracle-correct)",
        f"seek-worthy        {share} of {seek['samples_with_clues']} samples with clues: "
        f"{seek['sparse_frames']} sparse frames miss every clue interval",
    ]
    return "\n".join(lines)


def write_rows(rows: list[tuple[int, dict[str, Any]]], path: str | os.PathLike[str]) -> None:
    """Write rows as JSONL through a temporary file, so a crash never leaves half a dataset."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for _, row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def rebase_videos(rows: list[tuple[int, dict[str, Any]]], old_base: Path, new_base: Path) -> list[tuple[int, dict[str, Any]]]:
    """Rows whose relative video paths still point at the same files when written under `new_base`."""
    if old_base == new_base:
        return rows
    out = []
    for lineno, row in rows:
        video = row.get("video")
        if isinstance(video, str) and not os.path.isabs(video):
            row = {**row, "video": os.path.relpath(old_base / video, new_base)}
        out.append((lineno, row))
    return out


# ---- CLI ---------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="samples.jsonl")
    parser.add_argument("--fix-durations", action="store_true", help="fill every duration from its video and rewrite the file")
    parser.add_argument("--out", default=None, help="with --fix-durations: write here instead of rewriting DATASET")
    parser.add_argument("--overshoot", type=float, default=0.5, help="with --fix-durations: clip annotation ends at most this many seconds past the end (default 0.5)")
    parser.add_argument("--no-videos", action="store_true", help="check the rows only, do not open the videos")
    parser.add_argument("--sparse-frames", type=int, default=8, help="initial frames for the seek-worthiness figure (default 8, the env's)")
    parser.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help=f"video decoder (default {DEFAULT_BACKEND})")
    parser.add_argument("--decode-all", action="store_true",
                        help=f"decode every frame of every video (default: {CHECK_FRAMES} frames spread over each)")  # fmt: skip
    parser.add_argument("--json", dest="json_out", default=None, help="also write the statistics as JSON here")


def run(args: argparse.Namespace) -> int:
    if args.fix_durations and args.no_videos:
        raise DataError("--fix-durations needs the videos; drop --no-videos")
    if args.sparse_frames < 1:
        raise DataError(f"--sparse-frames must be >= 1, got {args.sparse_frames}")
    result = check_dataset(
        args.dataset,
        check_videos=not args.no_videos,
        fix_durations=args.fix_durations,
        overshoot=args.overshoot,
        backend=args.backend,
        progress=True,
        decode_all=args.decode_all,
    )
    for line in result.errors:
        print(line, file=sys.stderr)
    stats = dataset_statistics(result.samples, args.sparse_frames)
    stats["bad_rows"] = len(result.errors)
    print(format_statistics(stats))
    print(f"bad rows           {len(result.errors)}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    if args.fix_durations:
        if result.errors:
            print("durations not written: fix the bad rows first", file=sys.stderr)
        else:
            target = args.out or args.dataset
            write_rows(rebase_videos(result.rows, Path(args.dataset).resolve().parent, Path(target).resolve().parent), target)
            print(f"wrote {len(result.rows)} rows to {target}: {result.fixed_durations} durations set, "
                  f"{result.clipped_annotations} annotation ends clipped")
    return 2 if result.errors else 0  # bad input, as the README's command table promises
