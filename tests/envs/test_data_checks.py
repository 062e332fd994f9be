"""Issue 13 hardening of the data path: `rollout` checks videos before the first episode, a wrong
`duration` is warned once and crops stay inside the real video, `check-data` decodes frames and
exits 2, and `convert` parses inline options, accepts the public problem-type spellings and keeps
the good rows of a file with bad ones. Every video here is real and decoded."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import av
import numpy as np
import pytest
from videos import read_index, write_index_video

from videoseek.cli import main
from videoseek.envs.check_data import check_dataset
from videoseek.envs.convert import convert_files
from videoseek.envs.env import VideoSeekEnv
from videoseek.envs.sample import DataError, ProblemType, VideoSample
from videoseek.envs.video import DurationMismatchWarning

DECODER_NOISE = ("[mov,", "moov atom", "ERROR opening", "[h264", "video_reader.cc", "Invalid NAL")


# ---- bad videos, made for real ---------------------------------------------------------------
def noise_video(path: Path, frames: int = 100, fps: int = 10, gop: int = 10) -> Path:
    """64x48 x264 noise (no B-frames: packets are in presentation order), big enough per frame
    that damaging one packet's bytes damages that frame."""
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        s.options = {"g": str(gop), "crf": "23", "preset": "ultrafast"}
        for i in range(frames):
            for pk in s.encode(av.VideoFrame.from_ndarray(np.roll(base, 3 * i, axis=1), format="rgb24")):
                c.mux(pk)
        for pk in s.encode():
            c.mux(pk)
    return path


def corrupt_frames(src: Path, dst: Path, frames: list[int]) -> Path:
    """Overwrite the payload of the packets of `frames` with seeded garbage (the container is intact)."""
    with av.open(str(src)) as c:
        packets = [(p.pos, p.size) for p in c.demux(c.streams.video[0]) if p.size]
    data, rng = bytearray(src.read_bytes()), random.Random(0)
    for f in frames:
        pos, size = packets[f]
        for i in range(pos + 4, pos + size):
            data[i] = rng.randrange(256)
    dst.write_bytes(bytes(data))
    return dst


def truncated_faststart(src: Path, dst: Path) -> Path:
    """`src` remuxed with its moov atom first (as web players want), then cut in half."""
    full = dst.with_name("faststart-" + dst.name)
    with av.open(str(src)) as i, av.open(str(full), "w", options={"movflags": "faststart"}) as o:
        stream = o.add_stream_from_template(i.streams.video[0])
        for pkt in i.demux(i.streams.video[0]):
            if pkt.dts is not None:
                pkt.stream = stream
                o.mux(pkt)
    data = full.read_bytes()
    assert data[36:40] == b"moov"  # ftyp (32 bytes), then the index
    dst.write_bytes(data[: len(data) // 2])
    return dst


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad-videos")
    noise = noise_video(d / "noise.mp4")
    out = {
        "good": write_index_video(d / "index.mp4", num_frames=100, fps=10),
        "noise": noise,
        "mid": corrupt_frames(noise, d / "mid.mp4", list(range(45, 56))),  # frames 45-55 damaged
        "frame9": corrupt_frames(noise, d / "frame9.mp4", [9]),  # one frame, between spread points
        "truncated": truncated_faststart(noise, d / "truncated.mp4"),
        "empty": d / "empty.mp4",
        "text": d / "notes.mp4",
    }
    out["empty"].write_bytes(b"")
    out["text"].write_text("these are my notes, not a video\n" * 40)
    return out


def row(sid: str, video: Path | str, **kw) -> dict:
    return {"id": sid, "video": str(video), "question": "How many?", "answer": "3", "problem_type": "numerical", **kw}


def write_rows(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


# ---- item 4: rollout checks every video first ------------------------------------------------
def test_rollout_names_every_bad_video_before_the_first_episode(videos, tmp_path, capfd):
    data = write_rows(tmp_path / "d.jsonl", [
        row("ok", videos["good"]), row("gone", tmp_path / "missing.mp4"), row("empty", videos["empty"]),
        row("cut", videos["truncated"]), row("notes", videos["text"]),
    ])  # fmt: skip
    assert main(["rollout", "--data", str(data), "--out", str(tmp_path / "run"), "--policy", "no-tool", "--no-progress"]) == 2
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    expected = {2: ("gone", "missing.mp4", "video file not found"), 3: ("empty", "empty.mp4", "video file is empty"),
                4: ("cut", "truncated.mp4", "truncated or corrupt video"), 5: ("notes", "notes.mp4", "cannot decode video")}  # fmt: skip
    for lineno, (sid, name, cause) in expected.items():
        (hit,) = [line for line in lines if f"d.jsonl:{lineno} (sample {sid})" in line]
        assert hit.startswith("videoseek rollout: error: ") and name in hit and cause in hit
    assert "4 of 5 rows cannot run" in lines[-1] and "--skip-bad" in lines[-1]
    assert not any(noise in err for noise in DECODER_NOISE), err  # decoders' own lines silenced
    assert not (tmp_path / "run" / "trajectories.jsonl").exists()  # no episode ran


def test_rollout_skip_bad_drops_those_rows_and_warns_a_wrong_duration_once(videos, tmp_path, capfd):
    data = write_rows(tmp_path / "d.jsonl", [
        row("ok", videos["good"]), row("gone", tmp_path / "missing.mp4"),
        row("long", videos["noise"], duration=25.0),  # the file lasts 10 s
        row("long-2", videos["noise"], duration=25.0),
    ])  # fmt: skip
    run = tmp_path / "run"
    assert main(["rollout", "--data", str(data), "--out", str(run), "--policy", "no-tool", "--no-progress", "--skip-bad", "--group-size", "2"]) == 0
    err = capfd.readouterr().err
    assert "videoseek rollout: warning: " in err and "d.jsonl:2 (sample gone)" in err and "(row skipped)" in err
    (dur,) = [line for line in err.splitlines() if "field 'duration'" in line]  # once per video, not per row or env
    assert "25 s but" in dur and "noise.mp4 lasts 10.000 s" in dur
    trajs = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert sorted({t["sample_id"] for t in trajs}) == ["long", "long-2", "ok"] and len(trajs) == 6
    assert all(t["duration"] == pytest.approx(10.0) for t in trajs if t["sample_id"].startswith("long"))


def test_rollout_reports_an_episode_that_fails_mid_run(videos, tmp_path, capfd):
    # frames 45-55 do not decode but the last one does: the pre-check passes, the env's sparse
    # frame at 5.6 s fails at reset; the other sample still runs.
    data = write_rows(tmp_path / "d.jsonl", [row("ok", videos["good"]), row("mid", videos["mid"])])
    run = tmp_path / "run"
    assert main(["rollout", "--data", str(data), "--out", str(run), "--policy", "no-tool", "--no-progress"]) == 1
    captured = capfd.readouterr()
    (line,) = [x for x in captured.err.splitlines() if "episode mid/g0" in x]
    assert "(sample mid) failed:" in line and "truncated or corrupt video" in line and "mid.mp4" in line
    assert "1 of 2 episodes failed" in captured.err
    assert not any(noise in captured.err for noise in DECODER_NOISE), captured.err
    trajs = {t["sample_id"]: t for t in map(json.loads, (run / "trajectories.jsonl").read_text().splitlines())}
    assert trajs["ok"].get("failure") is None and trajs["mid"]["failure"]


# ---- item 5: a wrong duration is warned once and crops stay in the real video ----------------
def test_wrong_duration_warns_once_per_video_and_crops_the_real_video(tmp_path):
    video = write_index_video(tmp_path / "twenty.mp4", num_frames=200, fps=10)  # a fresh path: warned once
    sample = VideoSample(id="d", video=str(video), question="q", answer="3", problem_type="numerical",
                         duration=30.0, clue_intervals=[(12.0, 13.5)])  # fmt: skip
    with pytest.warns(DurationMismatchWarning, match=r"sample d: field 'duration': 30 s but .*twenty.mp4 lasts 20.000 s"):
        env = VideoSeekEnv(sample)
    assert env.duration == pytest.approx(20.0)
    obs, _ = env.reset(seed=0)
    got = [read_index(f) for f in obs["frames"]]
    assert got == [int((k + 0.5) * 20 / 8 * 10) for k in range(8)]  # spread over the real 20 s
    assert "Video duration: 20.0 seconds" in obs["text"]
    obs, _, _, _, info = env.step('<tool_call>{"name": "crop_video", "arguments": {"start": 15, "end": 30}}</tool_call>')
    assert info["error"] is None and len(obs["timestamps"]) == 8  # 8 distinct frames, not the last one repeated
    assert all(15 <= t < 20 for t in obs["timestamps"])
    assert [read_index(f) for f in obs["frames"]] == [round(t * 10) for t in obs["timestamps"]]
    obs, _, _, _, info = env.step('<tool_call>{"name": "crop_video", "arguments": {"start": 25, "end": 30}}</tool_call>')
    assert "outside the video" in info["error"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        VideoSeekEnv(sample.model_copy(update={"id": "d2"}))  # same video: no second warning
        close = VideoSeekEnv(sample.model_copy(update={"id": "d3", "duration": 20.4}))  # rounding: silent
    assert not [w for w in caught if issubclass(w.category, DurationMismatchWarning)]
    assert close.duration == pytest.approx(20.4)


# ---- item 6: check-data decodes frames, exits 2, reports JSON errors as the API does ---------
def test_check_data_finds_corrupt_frames_and_exits_2(videos, tmp_path, capsys):
    data = write_rows(tmp_path / "d.jsonl", [row("ok", videos["good"]), row("mid", videos["mid"]), row("cut", videos["truncated"])])
    result = check_dataset(data)
    assert [s.id for s in result.samples] == ["ok"]
    mid, cut = result.errors
    assert mid.startswith(f"{data}:2 (sample mid): field 'video': ") and "truncated or corrupt video: frame" in mid and "does not decode" in mid
    # moov first, mdat cut: decord's own error was "av_read_frame failed with 1094995529"
    assert cut.startswith(f"{data}:3 (sample cut): field 'video': ")
    assert "truncated or corrupt video: the file ends inside its 'mdat' box" in cut and "1094995529" not in cut
    assert main(["check-data", str(data)]) == 2
    assert "bad rows           2" in capsys.readouterr().out


def test_check_data_decode_all_finds_a_frame_the_spread_misses(videos, tmp_path):
    # PyAV decodes exactly what is asked (decord reads ahead and may trip over frame 9 anyway).
    data = write_rows(tmp_path / "d.jsonl", [row("f9", videos["frame9"])])
    assert check_dataset(data, backend="pyav").errors == []  # 16 spread frames: 0, 7, 13, ... all decode
    (err,) = check_dataset(data, backend="pyav", decode_all=True).errors
    assert "truncated or corrupt video: frames 0-31 (0.00-3.10 s) do not decode" in err


def test_json_errors_name_the_same_line_and_column_as_the_api(videos, tmp_path):
    broken = '{"id": "b", "video": "x.mp4", "question": "q"'  # the row ends early
    data = write_rows(tmp_path / "d.jsonl", [row("ok", videos["good"]), broken, row("u", videos["good"], question="q\u2028with a line separator")])
    (checked,) = check_dataset(data, check_videos=False).errors  # U+2028 inside a string is valid JSON
    with pytest.raises(DataError) as api:
        VideoSample.from_jsonl(data)
    assert checked == str(api.value) == f"{data}:2: invalid JSON (Expecting ',' delimiter at column {len(broken) + 1})"


# ---- item 7: converters ---------------------------------------------------------------------
def test_inline_options_are_parsed_by_every_converter(tmp_path):
    q = "Which pattern? A. blocks B. stripes C. dots D. nothing"
    o3 = {"task": "General video QA MCQ", "video_path": "v.mp4", "question": q, "answer": "B", "reasoning_process": "r"}
    r1 = {"problem_id": 1, "problem": "Which colour? (A) red (B) blue", "problem_type": "multiple choice",
          "solution": "<answer>B</answer>", "path": "./v.mp4", "data_type": "video"}  # fmt: skip
    moss = {"id": "m", "video": "v.mp4", "question": "Options on the next line\nA. up B. down", "answer": "down", "reasoning": "r"}
    for fmt, rec, question, options, answer in (
        ("open-o3", o3, "Which pattern?", ["A. blocks", "B. stripes", "C. dots", "D. nothing"], "B"),
        ("video-r1", r1, "Which colour?", ["(A) red", "(B) blue"], "B"),
        ("moss", {**moss, "problem_type": "multiple choice"}, "Options on the next line", ["A. up", "B. down"], "B"),
    ):  # fmt: skip
        src = tmp_path / f"{fmt}.json"
        src.write_text(json.dumps([rec]))
        result = convert_files([src], fmt)
        assert result.errors == [], fmt
        (s,) = result.samples
        assert (s.question, s.options, s.answer, s.problem_type) == (question, options, answer, ProblemType.multiple_choice)


@pytest.mark.parametrize("spelling, expected", [
    ("free-form", "free_form"), ("Free Form", "free_form"), ("open-ended", "free_form"), ("multiple choice", "multiple_choice"),
    ("Multiple-Choice", "multiple_choice"), ("MCQ", "multiple_choice"), ("OCR", "ocr"), ("numerical", "numerical"),
    ("Numeric", "numerical"), ("regression", "regression"), ("temporal grounding", "temporal_grounding"),
])  # fmt: skip
def test_public_problem_type_spellings_are_accepted(spelling, expected):
    opts = {"options": ["A. x", "B. y"], "answer": "A"} if expected == "multiple_choice" else {"answer": "3"}
    s = VideoSample(id="a", video="v.mp4", question="q", problem_type=spelling, **opts)
    assert s.problem_type == ProblemType(expected) and s.to_json_row()["problem_type"] == expected
    with pytest.raises(ValueError):
        VideoSample(id="a", video="v.mp4", question="q", answer="3", problem_type="essay")


def test_convert_writes_the_good_rows_and_names_each_bad_one(tmp_path, capsys):
    good = {"problem_id": 1, "problem": "How many?", "problem_type": "numerical", "solution": "<answer>3</answer>", "path": "./a.mp4"}
    src = tmp_path / "r1.json"
    src.write_text("[\n" + ",\n".join([
        json.dumps(good),
        json.dumps({**good, "problem_id": 2, "solution": "<answer>three</answer>"}),
        '{"problem_id": 3, "problem": "broken, "path": "./c.mp4"}',  # not JSON: reported, not fatal
        json.dumps({**good, "problem_id": 4, "problem_type": "free-form", "solution": "<answer>a cat</answer>"}),
    ]) + "\n]\n")  # fmt: skip
    out = tmp_path / "out.jsonl"
    assert main(["convert", "--from", "video-r1", str(src), "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert f"{src}:3: field 'solution': numerical answer is not a number: 'three'" in err
    assert any(e.startswith(f"{src}:4: field 'row': invalid JSON (") and "line 4" in e for e in err)
    assert [(s.id, s.problem_type.value) for s in VideoSample.from_jsonl(out)] == [("1", "numerical"), ("4", "free_form")]
    # --strict stops at the first bad row and writes nothing; so does a file where nothing converts
    assert main(["convert", "--from", "video-r1", str(src), "--out", str(tmp_path / "strict.jsonl"), "--strict"]) == 2
    assert not (tmp_path / "strict.jsonl").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**good, "solution": "x"}) + "\n{oops\n")
    assert main(["convert", "--from", "video-r1", str(bad), "--out", str(tmp_path / "none.jsonl")]) == 2
    assert "no row converted (2 bad rows" in capsys.readouterr().err and not (tmp_path / "none.jsonl").exists()


def test_a_json_array_cut_short_keeps_the_rows_before_the_cut(tmp_path):
    good = {"problem_id": 1, "problem": "How many?", "problem_type": "numerical", "solution": "3", "path": "./a.mp4"}
    src = tmp_path / "cut.json"
    src.write_text("[\n" + json.dumps(good) + ",\n" + json.dumps({**good, "problem_id": 2})[:40])
    result = convert_files([src], "video-r1")
    assert [s.id for s in result.samples] == ["1"]
    assert len(result.errors) == 1 and result.errors[0].startswith(f"{src}:3: field 'row': invalid JSON")

