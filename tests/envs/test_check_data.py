"""`videoseek check-data`: every row and video validated, bad rows by line, statistics on the
synthetic set, `--fix-durations` filling durations from the files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from videoseek.cli import main
from videoseek.envs.check_data import check_dataset, dataset_statistics, sparse_frames_miss, sparse_times
from videoseek.envs.sample import VideoSample
from videoseek.envs.synth import generate_dataset
from videoseek.envs.video import probe_video


@pytest.fixture(scope="module")
def synth_set(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    generate_dataset(out, n=5, seed=3, max_duration=12)
    return out / "samples.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list, raw_lines: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(r) for r in rows]
    for at, text in (raw_lines or {}).items():
        lines.insert(at, text)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_statistics_of_the_synthetic_set(synth_set):
    result = check_dataset(synth_set)
    assert result.errors == []
    samples = VideoSample.from_jsonl(synth_set)
    stats = dataset_statistics(result.samples)
    assert stats["samples"] == 5 and stats["without_duration"] == 0
    assert stats["problem_types"] == dict(Counter(s.problem_type.value for s in samples))
    assert stats["duration_s"]["min"] == min(s.duration for s in samples)
    assert stats["duration_s"]["max"] == max(s.duration for s in samples)
    lengths = [e - s for smp in samples for s, e in smp.clue_intervals]
    assert stats["clue_intervals"]["count"] == len(lengths)
    assert stats["clue_intervals"]["length_s"]["max"] == pytest.approx(max(lengths))
    assert stats["annotations"]["mask_patterns"] == sum(len(s.mask_patterns) for s in samples)
    assert stats["annotations"]["reference_reasoning"] == 5
    # synth places every clue between the env's 8 initial frames: the whole set is seek-worthy
    assert stats["seek_worthy"] == {"sparse_frames": 8, "samples_with_clues": 5, "missed_by_sparse_frames": 5, "share": 1.0}
    # the decoded durations agree with the generator's
    for s in result.samples:
        assert abs(result.video_durations[s.video] - s.duration) < 0.05


def test_seek_worthiness_counts_clues_a_sparse_frame_hits(synth_set, tmp_path):
    rows = _rows(synth_set)
    first = rows[0]
    t0 = float(sparse_times(first["duration"], 8)[0])
    first["clue_intervals"] = first["clue_intervals"] + [[t0 - 0.1, t0 + 0.1]]
    result = check_dataset(_write(tmp_path / "s.jsonl", rows), check_videos=False)
    stats = dataset_statistics(result.samples)
    assert stats["seek_worthy"]["missed_by_sparse_frames"] == 4 and stats["seek_worthy"]["share"] == pytest.approx(0.8)
    assert not sparse_frames_miss([(t0 - 0.1, t0 + 0.1)], first["duration"])
    assert sparse_frames_miss([(t0 + 0.1, t0 + 0.5)], first["duration"])


def test_bad_rows_are_reported_by_line(synth_set, tmp_path):
    rows = _rows(synth_set)
    for r in rows:  # absolute paths: the file is written elsewhere
        r["video"] = str(synth_set.parent / r["video"])
    rows[1]["video"] = "videos/missing.mp4"
    rows[2]["duration"] = rows[2]["duration"] + 30
    rows[3]["clue_intervals"] = [[1.0, rows[3]["duration"] + 5]]
    rows[3]["duration"] = None
    dup = dict(rows[0])
    rows.append(dup)
    path = _write(tmp_path / "s.jsonl", rows, raw_lines={4: '{"id": "x", oops'})
    result = check_dataset(path)
    assert [e.split(":", 2)[1] for e in result.errors] == ["2 (sample " + rows[1]["id"] + ")", "3 (sample " + rows[2]["id"] + ")",
                                                           "4 (sample " + rows[3]["id"] + ")", "5", "7 (sample " + dup["id"] + ")"]
    assert "video file not found" in result.errors[0] and "missing.mp4" in result.errors[0]
    assert "field 'duration'" in result.errors[1] and "use --fix-durations" in result.errors[1]
    assert "clue_intervals.0: end" in result.errors[2]
    assert "invalid JSON" in result.errors[3]
    assert "duplicate sample id" in result.errors[4] and "first on line 1" in result.errors[4]
    assert [s.id for s in result.samples] == [rows[0]["id"], rows[4]["id"]]


def test_fix_durations_fills_from_the_videos(synth_set, tmp_path, capsys):
    rows = _rows(synth_set)
    truth = {r["id"]: probe_video(synth_set.parent / r["video"]).duration for r in rows}
    for r in rows:
        r["duration"] = None
    rows[0]["clue_intervals"] = [[rows[0]["clue_intervals"][0][0], truth[rows[0]["id"]] + 0.3]]  # overshoots by 0.3 s
    src = _write(synth_set.parent / "undated.jsonl", rows)  # beside the videos: relative paths resolve

    assert main(["check-data", str(src)]) == 2  # the overshoot cannot be checked away without fixing
    assert "beyond the video duration" in capsys.readouterr().err

    out = tmp_path / "elsewhere" / "fixed.jsonl"
    out.parent.mkdir()
    stats_path = tmp_path / "stats.json"
    assert main(["check-data", str(src), "--fix-durations", "--out", str(out), "--json", str(stats_path)]) == 0
    report = capsys.readouterr().out
    assert "5 durations set, 1 annotation ends clipped" in report and "seek-worthy" in report
    fixed = {s.id: s for s in VideoSample.from_jsonl(out)}  # video paths rebased to the new folder
    assert {i: s.duration for i, s in fixed.items()} == truth
    assert fixed[rows[0]["id"]].clue_intervals[0][1] == truth[rows[0]["id"]]
    assert all(Path(s.video).is_file() for s in fixed.values())
    assert json.loads(stats_path.read_text())["samples"] == 5
    assert main(["check-data", str(out)]) == 0


def test_cli_errors(tmp_path, capsys):
    assert main(["check-data", str(tmp_path / "none.jsonl")]) == 2
    assert "dataset file not found" in capsys.readouterr().err
    path = _write(tmp_path / "s.jsonl", [])
    assert main(["check-data", str(path), "--fix-durations", "--no-videos"]) == 2


def test_docstring_examples():
    import doctest

    import videoseek.envs.check_data as module

    result = doctest.testmod(module)
    assert result.attempted >= 2 and result.failed == 0
