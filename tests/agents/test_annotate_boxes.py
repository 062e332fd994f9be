"""`videoseek annotate-boxes`: frame selection, mask -> box, merging, and SAM2 propagation over two
or three clue frames (SAM2 built from its packaged config with random weights, small, on CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from videoseek.agents.annotate_boxes import (
    Prompt,
    mask_to_box,
    merge_boxes,
    prompts_from_key_frames,
    read_prompts,
    select_frames,
)
from videoseek.envs.sample import DataError, VideoSample


def test_select_frames_covers_clues_and_prompts_within_budget():
    times = np.arange(300) / 10.0  # 30 s at 10 fps
    idx = select_frames(times, [(2.0, 4.0), (20.05, 20.08)], [25.0], fps=2.0, max_frames=32)
    assert set(idx.tolist()) == {20, 25, 30, 35, 40, 201, 250}  # 2/s over the clue, the nearest frame of a tiny clue, the prompt
    thin = select_frames(times, [(0.0, 29.9)], [12.34], fps=10.0, max_frames=5)
    assert len(thin) == 5 and 123 in thin.tolist() and thin.tolist() == sorted(set(thin.tolist()))


def test_mask_to_box_and_merge():
    mask = np.zeros((10, 20), bool)
    assert mask_to_box(mask) is None
    mask[2:5, 4:10] = True
    assert mask_to_box(mask) == [0.2, 0.2, 0.5, 0.5]
    s = VideoSample(id="a", video="v.mp4", question="q", answer="x", problem_type="free_form",
                    key_frames=[{"time": 1.0, "boxes": {"ball": [0.1, 0.1, 0.2, 0.2]}}])  # fmt: skip
    out, added = merge_boxes(s, {1.01: {"ball": [0.5, 0.5, 0.6, 0.6], "cup": [0, 0, 0.1, 0.1]}, 2.0: {"ball": [0.3, 0.3, 0.4, 0.4]}}, same_time=0.05)
    assert added == 2  # the existing ball box at 1.0 s is kept
    assert [(k.time, k.boxes) for k in out.key_frames] == [
        (1.0, {"ball": [0.1, 0.1, 0.2, 0.2], "cup": [0, 0, 0.1, 0.1]}),
        (2.0, {"ball": [0.3, 0.3, 0.4, 0.4]}),
    ]
    assert prompts_from_key_frames(out)[0] == Prompt("ball", 1.0, box=(0.1, 0.1, 0.2, 0.2))


def test_prompt_file_errors_name_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "a", "object": "ball", "time": 1, "points": [[0.5, 0.5]], "labels": [1]}) + "\n"
                    + json.dumps({"id": "a", "object": "cup", "time": 1, "box": [0.5, 0.5, 1.5, 0.9]}) + "\n")  # fmt: skip
    with pytest.raises(DataError, match=r"p\.jsonl:2: prompt for 'cup': coordinates must be normalised"):
        read_prompts(path)
    path.write_text(json.dumps({"id": "a", "time": 1, "box": [0.1, 0.1, 0.2, 0.2]}) + "\n")
    with pytest.raises(DataError, match=r"p\.jsonl:1: field 'object' missing"):
        read_prompts(path)


@pytest.fixture(scope="module")
def direction_sample(tmp_path_factory) -> VideoSample:
    from videoseek.envs.synth import generate_dataset

    out = tmp_path_factory.mktemp("synth-boxes")
    (sample,) = generate_dataset(out, n=1, seed=0, kinds=["direction"], max_duration=12)
    return sample


@pytest.fixture(scope="module")
def predictor():
    pytest.importorskip("sam2", reason="SAM2 is optional: SAM2_BUILD_CUDA=0 pip install --no-build-isolation sam2==1.1.0")
    import torch

    from videoseek.agents.annotate_boxes import build_predictor

    torch.manual_seed(0)
    # One thread: on a shared 2-core machine two torch threads spin-wait on each other.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield build_predictor(image_size=256)  # packaged tiny config, random weights
    torch.set_num_threads(previous)


def test_sam2_propagates_over_selected_clue_frames(direction_sample, predictor):
    from videoseek.agents.annotate_boxes import annotate_sample, track
    from videoseek.envs.video import open_video

    s = direction_sample
    (prompt,) = prompts_from_key_frames(s)
    reader = open_video(s.video)
    idx = select_frames(reader.frame_times, s.clue_intervals, [prompt.time], fps=1.0, max_frames=3)
    assert len(idx) == 3
    frames, times = reader.frames_by_index(idx, max_pixels=320 * 240)
    masks = track(predictor, np.ascontiguousarray(frames), [(int(np.abs(times - prompt.time).argmin()), 0, prompt)])
    assert sorted(masks) == [0, 1, 2]  # SAM2 saw exactly the selected frames, forward and backward
    assert all(m[0].shape == frames.shape[1:3] and m[0].dtype == bool for m in masks.values())

    out, added, n = annotate_sample(s, predictor, [prompt], fps=1.0, max_frames=3, max_pixels=320 * 240)
    assert n == 3 and added == 2  # the prompt frame keeps its box; the two others get tracked ones
    assert len(out.key_frames) == 3  # the prompt frame joined the existing key frame (within half a frame)
    half_frame = 0.5 / reader.fps
    for t in times:
        (kf,) = [k for k in out.key_frames if abs(k.time - t) <= half_frame + 1e-9]
        box = kf.boxes[prompt.object]
        assert 0 <= box[0] < box[2] <= 1 and 0 <= box[1] < box[3] <= 1
    original = s.key_frames[0]
    assert [k.boxes for k in out.key_frames if k.time == original.time] == [original.boxes]
    VideoSample.model_validate(out.model_dump())  # still a valid sample


def test_cli_annotate_boxes_resumes(direction_sample, predictor, tmp_path, capsys):
    from videoseek.cli import main
    from videoseek.envs.sample import write_jsonl

    plain = direction_sample.model_copy(update={"id": "no-boxes", "key_frames": []})
    data = write_jsonl([direction_sample, plain], tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    args = ["annotate-boxes", str(data), "--out", str(out), "--random-weights", "--image-size", "256", "--fps", "1",
            "--max-frames", "2", "--max-pixels", str(160 * 120)]  # fmt: skip
    assert main(args + ["--limit", "1"]) == 0
    assert "annotated 1 samples (0 already done): 1 boxes added over 2 frames" in capsys.readouterr().out
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == [direction_sample.id]
    assert main(args) == 2  # exists: needs --resume or --overwrite
    assert "pass --resume" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    assert "unchanged: 1 no prompt" in capsys.readouterr().out
    rows = VideoSample.from_jsonl(out)
    assert [r.id for r in rows] == [direction_sample.id, "no-boxes"]
    assert len(rows[0].key_frames) == 2 and rows[1].key_frames == []
    assert Path(rows[0].video).is_file()
    assert main(["annotate-boxes", str(data), "--out", str(tmp_path / "x.jsonl")]) == 2  # no checkpoint given


def test_docstring_examples():
    import doctest

    import videoseek.agents.annotate_boxes as module

    result = doctest.testmod(module)
    assert result.attempted >= 3 and result.failed == 0
