"""The look-on rate (`videoseek.envs.metrics.look_on`, issue 37): after two accepted crops that left
clue coverage at 0, does the next turn crop again? Checked on the scripted searchers `make learn`
trains from: the sweep looks on after two misses, the hasty searcher gives up and guesses."""

from __future__ import annotations

import pytest

from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import SCRIPTED
from videoseek.envs.env import EnvConfig
from videoseek.envs.metrics import look_on, look_on_rate
from videoseek.envs.synth import generate_dataset

ENV = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=6, max_total_frames=24, max_pixels=112 * 112)


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory):
    out = tmp_path_factory.mktemp("curriculum")
    return generate_dataset(out, n=6, seed=3, kinds=["flash_colour"], min_duration=10, max_duration=10, avoid_uniform=(4,))


def missed_twice(t) -> bool:
    """The definition spelled out on the record: two accepted crops, coverage 0 after the second, a turn after it."""
    crops = [k for k, turn in enumerate(t.turns) if turn.call is not None and turn.call.tool == "crop_video"]
    return len(crops) >= 2 and t.turns[crops[1]].evidence["coverage"] == 0 and crops[1] + 1 < len(t.turns)


@pytest.mark.parametrize(("name", "expected"), [("sweep", True), ("sweep-hasty", False)])
def test_look_on_follows_the_searchers_choice_after_two_misses(curriculum, tmp_path, name, expected):
    trajs = run_rollouts(curriculum, SCRIPTED[name](), env_config=ENV, out_dir=tmp_path, progress=False)
    counted = [t for t in trajs if missed_twice(t)]
    assert counted, "some flash lies beyond the first two quarter windows"
    assert all(look_on(t) is expected for t in counted)
    assert all(look_on(t) is None for t in trajs if not missed_twice(t))
    assert look_on_rate(trajs) == {"look_on": float(expected), "look_on_n": float(len(counted))}


def test_no_counted_episode_gives_no_rate(curriculum, tmp_path):
    trajs = run_rollouts(curriculum, SCRIPTED["oracle-brief"](), env_config=ENV, out_dir=tmp_path, progress=False)
    assert look_on_rate(trajs) == {"look_on_n": 0.0}
