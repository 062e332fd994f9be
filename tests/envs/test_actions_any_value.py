"""Structured actions with any value in any field, unencodable text, and the EnvConfig ranges
(issue 13, hardening items 1 and 11).

A structured action must give a valid action (numpy scalars and numeric strings coerced) or an
invalid turn with a one-line `info["error"]`: never an exception, never a trajectory that cannot
be read back (an unreadable line is an episode silently lost on resume).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from videoseek.envs import Answer, CropVideo, EnvConfig, Invalid, Think, VideoSample, VideoSeekEnv
from videoseek.envs.env import FRAME_RANGES, MAX_EPISODE_FRAME_BYTES
from videoseek.envs.trajectory import Trajectory

REPO = Path(__file__).resolve().parents[2]


def _id(value) -> str:
    try:
        return repr(value)[:24]
    except Exception:  # 10**5000 has no repr (int digit limit), BrokenStr none at all
        return type(value).__name__


class BrokenStr:
    """A value whose own conversion to text raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


@pytest.fixture(scope="module")
def env(index_video) -> VideoSeekEnv:
    sample = VideoSample(id="fuzz", video=str(index_video), question="Which colour?", options=["A. red", "B. green"],
                         answer="B", clue_intervals=[(12.0, 13.5)])  # fmt: skip
    return VideoSeekEnv(sample)


def play(env: VideoSeekEnv, actions) -> list[dict]:
    """Run the actions, then answer if still running; every step's info. Checks the invariants."""
    env.reset(seed=0)
    infos = []
    for action in [*actions, Answer("B")]:
        obs, reward, terminated, truncated, info = env.step(action)
        infos.append(info)
        error = info["error"]
        assert error is None or (isinstance(error, str) and error.strip() and "\n" not in error), repr(error)
        if info["action"]["type"] == "invalid":
            assert error, "an invalid turn must say why"
        json.dumps(info["action"])  # the parsed action is plain JSON (no numpy, no NaN objects)
        assert math.isfinite(reward)
        if terminated or truncated:
            break
    assert env.trajectory.terminated or env.trajectory.truncated
    line = env.trajectory.model_dump_json()  # what TrajectoryWriter writes...
    line.encode("utf-8")
    back = Trajectory.model_validate_json(line)  # ...must read back, or the episode is lost on resume
    assert [t.error for t in back.turns] == [i["error"] for i in infos]
    return infos


def test_numpy_scalars_and_numeric_strings_are_coerced(env):
    infos = play(env, [CropVideo(np.float32(12.0), np.int64(14)), CropVideo("0:02", "4.5s"), CropVideo(np.array(6.0), Decimal("8.5"))])
    assert [i["action"] for i in infos[:3]] == [
        {"type": "tool_call", "name": "crop_video", "arguments": {"start": 12.0, "end": 14.0}},
        {"type": "tool_call", "name": "crop_video", "arguments": {"start": 2.0, "end": 4.5}},
        {"type": "tool_call", "name": "crop_video", "arguments": {"start": 6.0, "end": 8.5}},
    ]
    assert all(i["error"] is None for i in infos)
    assert env.trajectory.turns[0].assistant == '<tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 14.0}}</tool_call>'


@pytest.mark.parametrize(
    "start",
    [None, "soon", 10**400, -(10**400), 10**5000, float("nan"), float("inf"), np.float64("nan"), True, [1, 2], b"1", 1 + 2j,
     Decimal("sNaN"), Fraction(10**400, 3), np.array([1.0, 2.0]), BrokenStr()],
    ids=_id,
)  # fmt: skip
def test_a_bad_crop_time_is_an_invalid_turn(env, start):
    info = play(env, [CropVideo(start, 5.0)])[0]
    assert info["action"]["type"] == "invalid" and "crop_video time" in info["error"]


def test_a_number_answers_and_the_episode_is_kept(env):
    info = play(env, [Answer(3)])[0]
    assert info["action"] == {"type": "answer", "text": "3"} and info["prediction"] == "3"
    assert env.trajectory.prediction == "3"


@pytest.mark.parametrize("text", [None, b"B", ["B"], BrokenStr(), float("nan"), "   "], ids=_id)
def test_a_bad_answer_is_an_invalid_turn(env, text):
    info = play(env, [Answer(text)])[0]
    assert info["action"]["type"] == "invalid" and info["error"]
    assert env.trajectory.turns[0].action["type"] != "answer"


@pytest.mark.parametrize("reason", [None, "", "two\nlines", 42, BrokenStr()], ids=_id)
def test_invalid_always_says_why_in_one_line(env, reason):
    info = play(env, [Invalid(reason)])[0]
    assert info["error"] and "\n" not in info["error"]


def test_unencodable_text_is_replaced_and_counted(env):
    infos = play(env, ["<think>a\ud800b</think><answer>B\udfff</answer>"])
    assert infos[0]["sanitized"] == 2 and infos[0]["prediction"] == "B\ufffd"
    turn = env.trajectory.turns[0]
    assert turn.assistant == "<think>a\ufffdb</think><answer>B\ufffd</answer>" and any("U+FFFD" in r for r in turn.repairs)
    assert env.trajectory.metrics["sanitized"] == 2


# float16 values from 64-bit draws: hypothesis 6.170 can re-encode a 64-bit float into a
# `floats(width=16)` branch of a one_of and overflow inside hypothesis (OverflowError in downcast).
FLOAT16 = st.one_of(st.floats(-65504, 65504), st.sampled_from([math.inf, -math.inf, math.nan])).map(np.float16)
# Anything a policy might hold: Python and numpy values of every kind, good and bad.
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([10**400, -(10**400), 10**5000]),
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-5, 25),
    st.text(max_size=12), st.sampled_from(["1.5", "0:03", "00:00:12.5", "7s", "12", "nan", "inf", "-1", "1e400", "", " ", "\ud800", "1\n2"]),
    st.binary(max_size=6), st.floats(-5, 25).map(np.float32), FLOAT16, st.integers(-5, 25).map(np.int64),
    st.integers(0, 255).map(np.uint8), st.booleans().map(np.bool_), st.text(max_size=4).map(np.str_), st.floats(-5, 25).map(np.array),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.complex_numbers(max_magnitude=10), st.decimals(allow_nan=True), st.fractions(),
    st.sampled_from([object(), BrokenStr(), np.array([1.0, 2.0]), Think]),
)  # fmt: skip
ACTIONS = st.one_of(
    st.builds(CropVideo, VALUES, VALUES), st.builds(Answer, VALUES), st.builds(Invalid, VALUES), st.just(Think()), VALUES,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ACTIONS, min_size=1, max_size=4))
def test_any_structured_action_gives_a_valid_or_invalid_turn(env, actions):
    # `env` is module-scoped and reset at every example: no state leaks between examples.
    infos = play(env, actions)
    for action, info in zip(actions, infos):
        if isinstance(action, CropVideo) and info["action"].get("name") == "crop_video":
            assert all(isinstance(info["action"]["arguments"][k], float) and math.isfinite(info["action"]["arguments"][k]) for k in ("start", "end"))
        if isinstance(action, Answer) and info["action"]["type"] == "answer":
            assert isinstance(info["action"]["text"], str) and info["action"]["text"].strip()


# ---- EnvConfig ranges (item 11) ---------------------------------------------------------------
@pytest.mark.parametrize("field", sorted(FRAME_RANGES))
def test_frame_budgets_outside_their_range_are_rejected_in_one_line(field):
    lo, hi = FRAME_RANGES[field]
    small = {"max_total_frames": 1} if field == "max_pixels" else {"max_pixels": 784}  # keep the byte bound out of it
    for bad in (lo - 1, hi + 1, None):
        with pytest.raises(ValidationError) as err:
            EnvConfig(**{**small, field: bad})
        msg = err.value.errors()[0]["msg"]
        assert field in msg and f"[{lo}, {hi}]" in msg and "\n" not in msg
    assert getattr(EnvConfig(**{**small, field: lo}), field) == lo and getattr(EnvConfig(**{**small, field: hi}), field) == hi


def test_the_bytes_one_episode_can_hold_are_bounded():
    with pytest.raises(ValidationError, match="MiB"):
        EnvConfig(max_total_frames=1024, max_pixels=1024 * 1024)
    assert 64 * 1024 * 1024 * 3 <= MAX_EPISODE_FRAME_BYTES  # 64 one-megapixel frames still fit


def test_an_episode_holds_at_most_the_documented_bytes(index_video):
    config = EnvConfig(initial_frames=8, frames_per_call=8, max_total_frames=20, max_pixels=96 * 48)
    sample = VideoSample(id="bytes", video=str(index_video), question="q", answer="B", options=["A. x", "B. y"])
    env = VideoSeekEnv(sample, config)
    env.reset(seed=0)
    for s in (0.0, 5.0, 10.0, 15.0):
        env.step(CropVideo(s, s + 4.0))
    held = sum(f.nbytes for f in env.frames_by_turn.values())
    assert 0 < held <= config.max_total_frames * config.max_pixels * 3


def test_every_ready_config_is_inside_the_ranges():
    from videoseek.training.run_csgrpo import SMOKE

    envs = [SMOKE["env"]] + [yaml.safe_load(p.read_text())["env"] for p in sorted((REPO / "training" / "configs").glob("*.yaml"))]
    assert len(envs) >= 5
    for env_block in envs:
        EnvConfig(**env_block)
    assert EnvConfig().max_pixels == 224 * 224
