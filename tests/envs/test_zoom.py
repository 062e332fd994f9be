"""The task that needs zoom (`videoseek synth --kinds small_text`) and the zoom tool's contract.

Real decoded video throughout: a small set of 1280x720 small_text samples is rendered once per
module, run through the real env with and without `zoom`, and read from pixels by the scripted
oracle's reader (`agents.scripted.read_label`), never from the answer field. The bad-input, budget
and mask tests use the 192x96 index video of conftest.py (cheap; its pixels encode the frame index).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from videoseek.agents.policy import Message, PolicyInput
from videoseek.agents.prompting import initial_messages
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import LEGIBLE_PX, OraclePolicy, cut_box, read_label, sign_ink
from videoseek.envs import EnvConfig, VideoSeekEnv
from videoseek.envs import synth
from videoseek.envs.actions import ToolCall
from videoseek.envs.tools import get_tool
from videoseek.envs.video import open_video

N = 10  # samples: 10/10 read with zoom; G = 5 guesses each without it, 50 episodes for the chance test
G = 5
SEED = 35
BOTH = ["crop_video", "zoom"]


@pytest.fixture(scope="module")
def small_text(tmp_path_factory) -> list:
    out = tmp_path_factory.mktemp("small_text")
    started = time.perf_counter()
    samples = synth.generate_dataset(out, N, seed=SEED, kinds=["small_text"])
    took = time.perf_counter() - started
    sizes = [Path(s.video).stat().st_size for s in samples]
    print(f"\n[small_text] {N} samples ({sum(s.duration for s in samples):.0f} s of 1280x720 video) in {took:.2f} s "
          f"({took / N:.2f} s each), {sum(sizes) / 2**20:.2f} MiB ({max(sizes) / 2**10:.0f} KiB the largest)")
    return samples


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


# ---- the task needs zoom ------------------------------------------------------------------------------
def test_oracle_reads_the_label_with_zoom(small_text):
    trajs = run_rollouts(small_text, OraclePolicy(), env_config=EnvConfig(tools=BOTH), progress=False)
    accuracy = float(np.mean([t.correct for t in trajs]))
    print(f"\n[small_text] oracle with crop_video + zoom: accuracy {accuracy:.2f} over {len(trajs)} episodes")
    assert accuracy >= 0.9
    for t in trajs:
        assert [c.tool for c in t.calls] == ["crop_video", "zoom"], t.sample_id
        zoom = t.calls[1]
        assert zoom.box_iou == pytest.approx(1.0, abs=1e-3)  # it zoomed on the key-frame box
        assert any(s <= zoom.time <= e for s, e in t.clue_intervals)


def test_oracle_without_zoom_is_at_chance(small_text):
    trajs = run_rollouts(small_text, OraclePolicy(), group_size=G, env_config=EnvConfig(tools=["crop_video"]), progress=False)
    assert len(trajs) == N * G
    hits = sum(t.correct for t in trajs)
    accuracy = hits / len(trajs)
    tail = binomial_tail(hits, len(trajs), 0.25)  # how likely this many hits are for a blind guess
    print(f"\n[small_text] oracle with crop_video alone: accuracy {accuracy:.2f} over {len(trajs)} episodes "
          f"(chance 0.25; P(>= {hits} hits by guessing) = {tail:.2f})")
    assert accuracy <= 0.5 and tail >= 0.001
    for t in trajs:
        assert [c.tool for c in t.calls] == ["crop_video"], t.sample_id  # it looked at the clue span...
        assert "cannot read" in t.turns[-1].assistant  # ...and the reader refused the crop's pixels


def test_oracle_without_a_tool_list_crops_only(small_text):
    """A runner that does not pass the env's tools (PolicyInput.tools None): no zoom is attempted."""
    sample = small_text[0]
    env = VideoSeekEnv(sample, EnvConfig(tools=BOTH))
    obs, info = env.reset(seed=0)
    messages = initial_messages(obs, info["instructions"])
    oracle = OraclePolicy()
    first = oracle.turn(PolicyInput(sample, messages, env.evidence, 0, tools=None))
    obs, *_ = env.step(first.text)
    messages += [Message("assistant", first.text), Message("tool", obs["text"], obs["frames"], obs["timestamps"])]
    second = oracle.turn(PolicyInput(sample, messages, env.evidence, 1, tools=None))
    assert "<answer>" in second.text and "zoom" not in second.text
    with_tools = oracle.turn(PolicyInput(sample, messages, env.evidence, 1, tools=info["tools"]))
    assert get_tool("zoom").call_text({"time": round(sample.key_frames[0].time, 3), "box": sample.key_frames[0].boxes["sign"]}) in with_tools.text


def test_label_is_illegible_at_the_default_budget_and_legible_zoomed(small_text):
    """The same reader, on the same frame: the sign cut from the ordinary frame is refused (its
    character is under LEGIBLE_PX tall) and, forced to match anyway, is far from reading it (0.34
    over 196 samples, chance 0.25: a 2-3 px smudge keeps a trace of the glyph's ink layout); the
    zoom on the sign returns its native pixels, about 18x as many, and is read right every time."""
    forced, native_gain = [], []
    for s in small_text:
        env = VideoSeekEnv(s, EnvConfig(tools=BOTH))
        env.reset(seed=0)
        kf = s.key_frames[0]
        box = kf.boxes["sign"]
        frames, _ = env.read_frames([kf.time])
        assert frames.shape[1:3] == (168, 298)  # the default budget, max_pixels = 224 * 224
        region = cut_box(frames[0], box)
        ink = sign_ink(region)
        assert ink is None or ink.shape[0] < LEGIBLE_PX, s.id  # a smudge of a few pixels
        assert read_label(region, s.options) is None, s.id
        forced.append(read_label(region, s.options, min_height=0) == s.answer)
        obs, *_, info = env.step(ToolCall("zoom", {"time": kf.time, "box": box}))
        assert info["error"] is None
        zoomed = obs["frames"][0]
        assert sign_ink(zoomed).shape[0] >= 9  # the character at its printed height, 9-11 px
        assert read_label(zoomed, s.options) == s.answer, s.id
        native_gain.append(zoomed.shape[0] * zoomed.shape[1] / (region.shape[0] * region.shape[1]))
    print(f"\n[small_text] forced reading of the ordinary frame: {np.mean(forced):.2f} (chance 0.25); zoom returns "
          f"{np.mean(native_gain):.1f}x the sign's pixels")
    assert np.mean(forced) <= 0.5
    assert min(native_gain) > 15


def test_a_masked_clue_leaves_the_zooming_oracle_guessing(small_text):
    """DM-GRPO's critical pattern masks the clue: the zoomed frame is black and the reader refuses it."""
    s = small_text[0]
    critical = next(k for k, m in enumerate(s.mask_patterns) if not m.oracle_correct)
    env = VideoSeekEnv(s, EnvConfig(tools=BOTH))
    env.reset(seed=0, options={"perturbation": {"kind": "mask", "pattern": critical}})
    kf = s.key_frames[0]
    obs, *_ = env.step(ToolCall("zoom", {"time": kf.time, "box": kf.boxes["sign"]}))
    assert obs["frames"].max() == 0 and env.trajectory.turns[-1].observation.frames[0].masked
    assert read_label(obs["frames"][0], s.options) is None


# ---- zoom's pixels ------------------------------------------------------------------------------------
def expected_zoom(path: str, t: float, box: list[float], max_pixels: int) -> np.ndarray:
    """The native decode of the frame shown at `t`, cut to `box`, resized (PIL bilinear) to fit max_pixels."""
    reader = open_video(path)
    (i,) = reader.indices_at([t])
    native, _ = reader.frames_by_index([int(i)], max_pixels=None)
    h, w = native.shape[1:3]
    left, top, right, bottom = (int(round(v * n)) for v, n in zip(box, (w, h, w, h)))
    crop = native[0, top:bottom, left:right]
    rw, rh = right - left, bottom - top
    if rw * rh <= max_pixels:
        return crop
    scale = math.sqrt(max_pixels / (rw * rh))
    return np.asarray(Image.fromarray(crop).resize((int(rw * scale), int(rh * scale)), Image.BILINEAR))


@pytest.mark.parametrize("box", [[0.1, 0.2, 0.7, 0.9], [0.0, 0.0, 1.0, 1.0], [0.3, 0.4, 0.45, 0.52]])
def test_zoom_frame_is_the_native_region_resized(small_text, box):
    s = small_text[1]
    t = s.key_frames[0].time
    env = VideoSeekEnv(s, EnvConfig(tools=BOTH))
    env.reset(seed=0)
    obs, *_, info = env.step(ToolCall("zoom", {"time": t, "box": box}))
    assert info["error"] is None
    got, want = obs["frames"][0], expected_zoom(s.video, t, box, env.config.max_pixels)
    assert got.shape == want.shape
    assert got.shape[0] * got.shape[1] <= env.config.max_pixels
    assert int(np.abs(got.astype(int) - want.astype(int)).max()) <= 1  # the resizer's rounding at most
    reader = open_video(s.video)
    assert obs["timestamps"][0] == pytest.approx(reader.frame_times[reader.indices_at([t])[0]])


# ---- bad zoom input: a one-line reason, no frames, the turn spent -------------------------------------
NAN, INF = float("nan"), float("inf")
BAD = [
    ("x1 >= x2", {"time": 1.0, "box": [0.5, 0.1, 0.5, 0.4]}, "needs x1 < x2 and y1 < y2"),
    ("x1 > x2", {"time": 1.0, "box": [0.6, 0.1, 0.2, 0.4]}, "needs x1 < x2 and y1 < y2"),
    ("y1 >= y2", {"time": 1.0, "box": [0.1, 0.6, 0.4, 0.2]}, "needs x1 < x2 and y1 < y2"),
    ("outside right", {"time": 1.0, "box": [1.2, 0.1, 1.5, 0.4]}, "lies outside the frame"),
    ("outside top-left", {"time": 1.0, "box": [-0.5, -0.5, -0.1, -0.1]}, "lies outside the frame"),
    ("touching the edge only", {"time": 1.0, "box": [0.2, 1.0, 0.4, 1.3]}, "lies outside the frame"),
    ("nan in box", {"time": 1.0, "box": [0.1, NAN, 0.5, 0.5]}, "'box.1' must be a finite number"),
    ("inf in box", {"time": 1.0, "box": [0.1, 0.1, INF, 0.5]}, "'box.2' must be a finite number"),
    ("nan time", {"time": NAN, "box": [0.1, 0.1, 0.5, 0.5]}, "'time' must be a finite number"),
    ("3 numbers", {"time": 1.0, "box": [0.1, 0.2, 0.3]}, "is too short"),
    ("5 numbers", {"time": 1.0, "box": [0.1, 0.2, 0.3, 0.4, 0.5]}, "is too long"),
    ("a number", {"time": 1.0, "box": 0.5}, "is not of type 'array'"),
    ("a string", {"time": 1.0, "box": "0,0,1,1"}, "is not of type 'array'"),
    ("a word in box", {"time": 1.0, "box": ["a", 0.1, 0.5, 0.5]}, "'a' is not of type 'number'"),
    ("time before 0", {"time": -1.0, "box": [0.1, 0.1, 0.5, 0.5]}, "lies outside the video"),
    ("time after the end", {"time": 25.0, "box": [0.1, 0.1, 0.5, 0.5]}, "lies outside the video"),
    ("time a word", {"time": "soon", "box": [0.1, 0.1, 0.5, 0.5]}, "'soon' is not of type 'number'"),
    ("time a bool", {"time": True, "box": [0.1, 0.1, 0.5, 0.5]}, "True is not of type 'number'"),
    ("no box", {"time": 1.0}, "'box' is a required property"),
    ("no time", {"box": [0.1, 0.1, 0.5, 0.5]}, "'time' is a required property"),
]


@pytest.mark.parametrize("written", ["text", "structured"])
@pytest.mark.parametrize("case, arguments, reason", BAD, ids=[b[0] for b in BAD])
def test_bad_zoom_input_is_a_one_line_error(index_sample, case, arguments, reason, written):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=BOTH))
    env.reset(seed=0)
    left = env.frames_left
    action = get_tool("zoom").call_text(arguments) if written == "text" else ToolCall("zoom", arguments)
    obs, reward, terminated, truncated, info = env.step(action)
    assert reason in info["error"] and len(info["error"].splitlines()) == 1, info["error"]
    assert obs["text"].startswith("Error:") and len(obs["frames"]) == 0 and not (terminated or truncated)
    turn = env.trajectory.turns[-1]
    assert turn.call is None and turn.error == info["error"] and turn.tool_name == "zoom"  # the turn is spent, recorded by name
    assert env.trajectory.invalid_calls == 1 and env.trajectory.calls == [] and env.frames_left == left


def test_a_box_partly_outside_is_clipped_and_recorded(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=BOTH))
    env.reset(seed=0)
    obs, *_, info = env.step(get_tool("zoom").call_text({"time": 3.0, "box": [-0.2, 0.1, 0.5, 1.3]}))
    assert info["error"] is None and "clipped" in obs["text"]
    call = env.trajectory.turns[-1].call
    assert call.clipped and call.tool == "zoom"
    assert call.arguments == {"time": 3.0, "box": [0.0, 0.1, 0.5, 1.0]} and call.box == [0.0, 0.1, 0.5, 1.0]
    assert call.requested == {"time": 3.0, "box": [-0.2, 0.1, 0.5, 1.3]}
    inside = VideoSeekEnv(index_sample, EnvConfig(tools=BOTH))
    inside.reset(seed=0)
    same, *_ = inside.step(ToolCall("zoom", {"time": 3.0, "box": [0.0, 0.1, 0.5, 1.0]}))
    assert np.array_equal(obs["frames"], same["frames"])  # the clipped box's pixels
    assert not inside.trajectory.turns[-1].call.clipped


# ---- budget and perturbation ----------------------------------------------------------------------------
def test_zoomed_frames_count_against_the_frame_budget(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=BOTH, initial_frames=8, max_total_frames=10))
    env.reset(seed=0)
    for k in range(2):
        obs, *_, info = env.step(ToolCall("zoom", {"time": 2.0 + k, "box": [0.0, 0.0, 0.5, 0.5]}))
        assert info["error"] is None and len(obs["frames"]) == 1
    assert env.frames_left == 0
    obs, *_, info = env.step(ToolCall("zoom", {"time": 5.0, "box": [0.0, 0.0, 0.5, 0.5]}))
    assert "frame budget of 10 frames is spent" in info["error"] and len(obs["frames"]) == 0
    env.step("<think>done</think><answer>A</answer>")
    assert env.trajectory.metrics["frames"] == 10


def test_mask_perturbation_zeroes_a_zoomed_frame_whose_time_is_masked(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=BOTH))
    env.reset(seed=0, options={"perturbation": {"kind": "mask", "time_range": [5.0, 6.0]}})
    box = {"box": [0.0, 0.25, 1.0, 0.75]}
    masked, *_ = env.step(ToolCall("zoom", {"time": 5.5, **box}))
    kept, *_ = env.step(ToolCall("zoom", {"time": 8.0, **box}))
    assert masked["frames"].shape[0] == 1 and masked["frames"].max() == 0
    assert kept["frames"].max() == 255  # the index video's white stripes
    assert [t.observation.frames[0].masked for t in env.trajectory.turns] == [True, False]
    plain = VideoSeekEnv(index_sample, EnvConfig(tools=BOTH))
    plain.reset(seed=0)
    unmasked, *_ = plain.step(ToolCall("zoom", {"time": 5.5, **box}))
    assert unmasked["frames"].max() == 255 and np.array_equal(plain.step(ToolCall("zoom", {"time": 8.0, **box}))[0]["frames"], kept["frames"])
