"""Synthetic seek-worthy tasks (`videoseek.envs.synth`) and their pixel-level perceivers.

One small set (10 samples, every kind twice) is rendered once per session; frames are decoded
with decord directly, resized and stamped with a clock the way the env may hand them to a policy.
"""

from __future__ import annotations

import doctest
import json
import math
import re
import time
from pathlib import Path

import av
import decord
import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from videoseek.cli import main as cli_main
from videoseek.envs import perceive as perceive_module
from videoseek.envs import synth
from videoseek.envs.perceive import perceive
from videoseek.envs.sample import VideoSample, iter_jsonl
from videoseek.rewards import format_reward, parse_time, ref_delta_format_reward, timestamp_reward

SEED = 123
N = 10
MAX_DURATION = 45.0  # keeps the test set to a few minutes of video; the default mix runs to 180 s


@pytest.fixture(scope="module")
def synth_set(tmp_path_factory) -> tuple[Path, list[VideoSample]]:
    out = tmp_path_factory.mktemp("synth")
    started = time.perf_counter()
    samples = synth.generate_dataset(out, N, seed=SEED, max_duration=MAX_DURATION)
    print(f"\n[synth] {N} samples ({sum(s.duration for s in samples):.0f} s of video) in {time.perf_counter() - started:.2f} s")
    return out, samples


# ---- decoding as the env would ------------------------------------------------------------------
def decode_at(path: str, times) -> tuple[np.ndarray, np.ndarray]:
    """Frames shown at `times` (the last frame starting at or before each) and their timestamps."""
    vr = decord.VideoReader(path)
    pts = vr.get_frame_timestamp(np.arange(len(vr)))[:, 0].astype(np.float64)
    idx = np.clip(np.searchsorted(pts, np.asarray(times) + 1e-6, side="right") - 1, 0, len(vr) - 1)
    return vr.get_batch(list(idx)).asnumpy(), pts[idx]


def as_policy_sees(frames: np.ndarray, times: np.ndarray, max_pixels: int | None, clock: bool) -> np.ndarray:
    """Resize to a pixel budget (bilinear) and burn an HH:MM:SS clock top-left, white on black."""
    out = []
    for f, t in zip(frames, times):
        img = Image.fromarray(f)
        if max_pixels and img.width * img.height > max_pixels:
            scale = math.sqrt(max_pixels / (img.width * img.height))
            img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.BILINEAR)
        if clock:
            draw = ImageDraw.Draw(img)
            text = time.strftime("%H:%M:%S", time.gmtime(int(t)))
            box = draw.textbbox((2, 2), text, font=ImageFont.load_default())
            draw.rectangle((0, 0, box[2] + 2, box[3] + 2), fill=(0, 0, 0))
            draw.text((2, 2), text, fill=(255, 255, 255), font=ImageFont.load_default())
        out.append(np.asarray(img))
    return np.stack(out)


def blind_copy(sample: VideoSample) -> VideoSample:
    """The sample without anything that gives the solution away (what a perceiver may read)."""
    meta = {k: v for k, v in sample.metadata.items() if k != "generation"}
    return sample.model_copy(update={
        "answer": "?", "clue_intervals": [], "reference_reasoning": None, "key_frames": [], "mask_patterns": [], "metadata": meta,
    })


def oracle_times(sample: VideoSample, per_clue: int = 8) -> list[float]:
    """8 uniform initial frames, then `per_clue` frames spread over each clue (as crop_video would)."""
    times = list(synth.uniform_times(sample.duration))
    for s, e in sample.clue_intervals:
        times += list(s + (np.arange(per_clue) + 0.5) * (e - s) / per_clue)
    return times


def dm_mask(frames: np.ndarray, times: np.ndarray, time_range) -> np.ndarray:
    """DM-GRPO: zero the frames whose floor(time) lies in [floor(s), floor(e)], keep their positions."""
    lo, hi = math.floor(time_range[0]), math.floor(time_range[1])
    out = frames.copy()
    out[(np.floor(times) >= lo) & (np.floor(times) <= hi)] = 0
    return out


# ---- the files ------------------------------------------------------------------------------------
def test_every_kind_appears_and_rows_validate(synth_set):
    out, samples = synth_set
    reloaded = list(iter_jsonl(out / "samples.jsonl"))
    assert [s.id for s in reloaded] == [s.id for s in samples]
    assert sorted(s.metadata["task_kind"] for s in reloaded) == sorted(synth.TASK_KINDS * 2)
    assert {s.problem_type.value for s in reloaded} == {"multiple_choice", "numerical"}
    for s in reloaded:
        assert Path(s.video).is_file() and Path(s.video).parent == out / "videos"
        if s.options:
            assert s.answer in [o[0] for o in s.options], s.id
        else:
            assert s.answer.isdigit(), s.id
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert all(not Path(r["video"]).is_absolute() for r in rows)  # the set can be moved


def test_videos_are_h264_with_one_second_gop_and_match_durations(synth_set):
    _, samples = synth_set
    for s in samples:
        gen = s.metadata["generation"]
        vr = decord.VideoReader(s.video)
        assert len(vr) == gen["n_frames"]
        assert vr.get_avg_fps() == pytest.approx(gen["fps"])
        assert float(vr.get_frame_timestamp([len(vr) - 1])[0, 1]) == pytest.approx(s.duration, abs=1e-3)
        assert np.all(np.diff(vr.get_key_indices()) == gen["fps"]), s.id
        assert (vr[0].shape[1], vr[0].shape[0]) == (gen["width"], gen["height"])
        assert 160 <= gen["width"] <= 320 and 8 <= gen["fps"] <= 30 and 10 <= s.duration <= MAX_DURATION
        with av.open(s.video) as c:
            st = c.streams.video[0]
            assert (st.codec_context.name, st.codec_context.pix_fmt) == ("h264", "yuv420p")


def test_same_seed_same_bytes_regardless_of_workers(synth_set, tmp_path):
    """A 4-sample set with the same seed is the first 4 samples of the 10, byte for byte."""
    out, _ = synth_set
    again = synth.generate_dataset(tmp_path, 4, seed=SEED, workers=2, max_duration=MAX_DURATION)
    first_rows = (out / "samples.jsonl").read_text().splitlines()[:4]
    assert (tmp_path / "samples.jsonl").read_text().splitlines() == first_rows
    for s in again:
        assert Path(s.video).read_bytes() == (out / "videos" / Path(s.video).name).read_bytes(), s.id


def test_another_seed_gives_other_samples(synth_set, tmp_path):
    _, samples = synth_set
    other = synth.make_sample(SEED + 1, 0, samples[0].metadata["task_kind"], tmp_path, max_duration=MAX_DURATION)
    assert (other.duration, other.clue_intervals, other.question) != (samples[0].duration, samples[0].clue_intervals, samples[0].question)


# ---- seek-worthiness ------------------------------------------------------------------------------
def test_uniform_frames_miss_every_clue_in_time_and_in_pixels(synth_set):
    _, samples = synth_set
    for s in samples:
        times = synth.uniform_times(s.duration)
        for s0, e0 in s.clue_intervals:
            assert not np.any((times >= s0 - 1e-6) & (times <= e0 + 1e-6)), s.id
        frames, _ = decode_at(s.video, times)
        # No task object in any sparse frame: the decoded scene is grey everywhere.
        assert int((perceive_module.chroma(frames) >= perceive_module.MIN_CHROMA).sum()) == 0, s.id


def test_placement_avoids_uniform_frames_over_many_plans():
    """Plans only (no rendering): 250 samples of every kind, clues never hold a uniform frame."""
    for index in range(250):
        kind = synth.TASK_KINDS[index % len(synth.TASK_KINDS)]
        rng = np.random.default_rng([7, index])
        spec = synth.choose_spec(rng, kind)
        placer = synth.Placer(spec, avoid_uniform=(8,))
        plan = synth.TASK_BUILDERS[kind](rng, spec, placer)
        shown = np.floor(synth.uniform_times(spec.duration) * spec.fps + 1e-6).astype(int)
        for a, b in plan.clues:
            assert 0 < a < b <= spec.n_frames
            assert not np.any((shown >= a - 1) & (shown <= b)), (kind, index)
            assert synth.MIN_CLUE_SECONDS - 1e-9 <= (b - a) / spec.fps <= 3.7, (kind, index)


def test_perceiver_answers_from_clue_frames_not_from_sparse_frames(synth_set):
    _, samples = synth_set
    oracle_hits, sparse_hits = [], []
    for k, s in enumerate(samples):
        blind = blind_copy(s)
        budget, clock = [(None, False), (160 * 120 // 2, True), (64 * 48, True)][k % 3]
        frames, ts = decode_at(s.video, oracle_times(s))
        seen = as_policy_sees(frames, ts, budget, clock)
        oracle_hits.append(perceive(blind, seen, ts) == s.answer)
        sparse_hits.append(perceive(blind, seen[:8], ts[:8]) == s.answer)
        # frames in any order give the same answer
        order = np.random.default_rng(k).permutation(len(ts))
        assert perceive(blind, seen[order], ts[order]) == perceive(blind, seen, ts)
    print(f"\n[perceive] oracle accuracy {np.mean(oracle_hits):.2f}, sparse-only accuracy {np.mean(sparse_hits):.2f}")
    assert np.mean(oracle_hits) >= 0.9
    assert np.mean(sparse_hits) <= 0.2


def test_mask_patterns_match_what_masking_does(synth_set):
    """Masking the non-critical range leaves the oracle right; masking the critical one does not."""
    _, samples = synth_set
    for s in samples:
        assert [m.oracle_correct for m in s.mask_patterns] == [True, False], s.id
        frames, ts = decode_at(s.video, oracle_times(s))
        blind = blind_copy(s)
        for m in s.mask_patterns:
            got = perceive(blind, dm_mask(frames, ts, m.time_range), ts)
            assert (got == s.answer) == m.oracle_correct, (s.id, m.time_range, got)
        quiet = s.mask_patterns[0].time_range
        blanked = (math.floor(quiet[0]), math.floor(quiet[1]) + 1)
        assert all(e0 <= blanked[0] or s0 >= blanked[1] for s0, e0 in s.clue_intervals), s.id
        assert tuple(s.mask_patterns[1].time_range) in {tuple(c) for c in s.clue_intervals}


def test_reference_reasoning_is_ref_delta_with_the_clue_timestamps(synth_set):
    _, samples = synth_set
    for s in samples:
        text = s.reference_reasoning
        assert ref_delta_format_reward(text) == 1.0, s.id
        assert format_reward(text) == 1.0, s.id
        assert timestamp_reward(text, s.duration) == 1.0, s.id
        assert text.endswith(f"<answer>{s.answer}</answer>")
        deltas = [(parse_time(a), parse_time(b)) for a, b in re.findall(r"<time_range>(\S+) - (\S+)</time_range>, <delta>", text)]
        for s0, e0 in s.clue_intervals:  # every clue is described by a delta lying inside it
            assert any(s0 - 0.05 <= a < b <= e0 + 0.05 for a, b in deltas), (s.id, (s0, e0), deltas)
        q0, q1 = s.mask_patterns[0].time_range
        assert f"<time_range>{synth.format_timestamp(q0)} - {synth.format_timestamp(q1)}</time_range>, <delta>Negligible change" in text


def test_key_frames_box_the_object_inside_a_clue(synth_set):
    _, samples = synth_set
    for s in samples:
        assert s.key_frames, s.id
        for kf in s.key_frames:
            assert any(a <= kf.time <= b for a, b in s.clue_intervals), s.id
            frame, _ = decode_at(s.video, [kf.time])
            h, w = frame.shape[1:3]
            for box in kf.boxes.values():
                x1, y1, x2, y2 = box
                crop = frame[0, int(y1 * h) : max(int(y1 * h) + 1, int(y2 * h)), int(x1 * w) : max(int(x1 * w) + 1, int(x2 * w))]
                assert (perceive_module.chroma(crop) >= perceive_module.MIN_CHROMA).mean() > 0.3, (s.id, box)


# ---- small_text: the opt-in kind that needs zoom (tests/envs/test_zoom.py runs it through the env) ----
def test_small_text_is_opt_in():
    assert "small_text" in synth.TASK_BUILDERS and "small_text" in synth.ZOOM_KINDS
    assert "small_text" not in synth.TASK_KINDS  # the default mix is unchanged


def test_small_text_plans_over_many_seeds():
    """Plans only (no rendering): a 1280x720 sign of 1.5-3 % of the frame, below the clock band, a
    character 9-11 px tall, 1-2 s away from every uniform frame, and 4 distinct options."""
    for index in range(200):
        rng = np.random.default_rng([11, index])
        spec = synth.choose_spec(rng, "small_text")
        assert (spec.width, spec.height, spec.fps) == (1280, 720, 4) and 18.0 <= spec.duration <= 20.0
        plan = synth.small_text_task(rng, spec, synth.Placer(spec, avoid_uniform=(8,)))
        ((a, b),) = plan.clues
        shown = np.floor(synth.uniform_times(spec.duration) * spec.fps + 1e-6).astype(int)
        assert not np.any((shown >= a - 1) & (shown <= b)), index
        assert 1.0 <= (b - a) / spec.fps <= 2.0, index
        (label,) = plan.labels
        x1, y1, x2, y2 = label.box(spec)
        assert 0 <= x1 < x2 <= 1 and 0.15 <= y1 < y2 <= 1
        assert 0.015 <= (x2 - x1) * (y2 - y1) <= 0.031
        assert 9 <= synth.render_glyph(label.text, label.font_size).shape[0] <= 11
        texts = [o.split(". ", 1)[1] for o in plan.options]
        assert len(set(texts)) == 4 and set(texts) <= set(synth.LABEL_CHARS)
        assert texts["ABCD".index(plan.answer)] == label.text
        (kf,) = plan.key_frames
        assert a / spec.fps <= kf["time"] <= b / spec.fps and kf["boxes"] == {"sign": label.box(spec)}


def test_small_text_videos_show_the_sign_only_in_the_clue(tmp_path):
    started = time.perf_counter()
    samples = synth.generate_dataset(tmp_path, 2, seed=SEED, kinds=["small_text"])
    took = time.perf_counter() - started
    sizes = [Path(s.video).stat().st_size for s in samples]
    print(f"\n[synth] 2 small_text samples in {took:.2f} s, {max(sizes) / 2**10:.0f} KiB the larger")
    for s in samples:
        gen = s.metadata["generation"]
        vr = decord.VideoReader(s.video)
        assert (vr[0].shape[1], vr[0].shape[0], len(vr)) == (1280, 720, gen["n_frames"])
        assert np.all(np.diff(vr.get_key_indices()) == synth.MIN_GOP), s.id  # 4 fps: a keyframe every 8 frames
        ((c0, c1),) = s.clue_intervals
        kf = s.key_frames[0]
        x1, y1, x2, y2 = kf.boxes["sign"]
        times = [*synth.uniform_times(s.duration), kf.time, c0 - 0.3, c1 + 0.05]
        frames, _ = decode_at(s.video, times)
        plate = [(f[int(y1 * 720) + 2 : int(y2 * 720) - 2, int(x1 * 1280) + 2 : int(x2 * 1280) - 2] >= 225).all(-1).mean() for f in frames]
        assert plate[8] > 0.9 and max(plate[:8] + plate[9:]) < 0.05, (s.id, plate)  # shown at the key frame only
        assert ref_delta_format_reward(s.reference_reasoning) == 1.0 and timestamp_reward(s.reference_reasoning, s.duration) == 1.0
        assert [m.oracle_correct for m in s.mask_patterns] == [True, False]
        assert sum(sizes) / len(sizes) < 1.5 * 2**20


# ---- helpers and the command ----------------------------------------------------------------------
def test_module_doctests():
    for module in (synth, perceive_module):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_noncritical_range_keeps_clear_of_clues():
    spec = synth.VideoSpec(160, 120, 10, 120)  # 12 s
    clues = [(25, 40), (61, 70)]  # 2.5–4.0 s and 6.1–7.0 s
    picks = {synth.choose_noncritical(np.random.default_rng(k), spec, clues) for k in range(40)}
    assert picks == {(8.0, 10.0), (9.0, 11.0)}  # 3 clue-free whole seconds ending inside the video
    assert synth.choose_noncritical(np.random.default_rng(0), synth.VideoSpec(160, 120, 10, 30), [(3, 27)]) is None


def test_perceiver_gives_none_for_unknown_kinds_and_empty_input(synth_set):
    _, samples = synth_set
    s = samples[0]
    frames, ts = decode_at(s.video, oracle_times(s))
    assert perceive(s.model_copy(update={"metadata": {"task_kind": "other"}}), frames, ts) is None
    assert perceive(s, frames[:0], ts[:0]) is None
    assert perceive(s, frames, ts[:3]) is None  # mismatched lengths


def test_cli_writes_a_set_and_rejects_bad_input(tmp_path, capsys):
    assert cli_main(["synth", "--out", str(tmp_path / "set"), "--n", "2", "--seed", "5", "--kinds", "flash_shape,direction"]) == 0
    rows = list(iter_jsonl(tmp_path / "set" / "samples.jsonl"))
    assert [r.metadata["task_kind"] for r in rows] and {r.metadata["task_kind"] for r in rows} <= {"flash_shape", "direction"}
    capsys.readouterr()
    assert cli_main(["synth", "--out", str(tmp_path / "x"), "--kinds", "flash,direction"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--kinds" in err and "flash" in err and len(err.splitlines()) == 1
    assert cli_main(["synth", "--out", str(tmp_path / "zoom"), "--n", "1", "--kinds", "small_text"]) == 0
    (row,) = iter_jsonl(tmp_path / "zoom" / "samples.jsonl")
    assert row.metadata["task_kind"] == "small_text" and row.metadata["generation"]["width"] == 1280
    capsys.readouterr()
    assert cli_main(["synth", "--out", str(tmp_path / "x"), "--n", "0"]) == 2
    (tmp_path / "file").write_text("x")
    assert cli_main(["synth", "--out", str(tmp_path / "file"), "--n", "1"]) == 2
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.benchmark
def test_benchmark_fifty_samples(tmp_path):
    started = time.perf_counter()
    samples = synth.generate_dataset(tmp_path, 50, seed=0)
    took = time.perf_counter() - started
    size = sum(Path(s.video).stat().st_size for s in samples)
    print(f"\n[synth] 50 samples, {sum(s.duration for s in samples):.0f} s of video, {size / 2**20:.1f} MiB, in {took:.1f} s")
