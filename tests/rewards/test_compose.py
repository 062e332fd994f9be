"""Episode scoring seam: EpisodeSummary + RewardConfig -> (total, components)."""

import pytest
from pydantic import ValidationError

from videoseek.envs.sample import VideoSample
from videoseek.rewards import EpisodeSummary, RewardConfig, score_episode

SAMPLE = VideoSample(id="s1", video="v.mp4", question="Which colour?", options=["A. red", "B. blue"], answer="B", duration=20.0, clue_intervals=[(4.0, 8.0)])


def episode(turns, prediction, calls=()):
    return EpisodeSummary(prediction=prediction, assistant_turns=list(turns), calls=list(calls), invalid_calls=0, duration=20.0)


def test_default_preset_is_accuracy_plus_format():
    # "default" is a preset chosen by name; the default preset of RewardConfig() is csgrpo.
    assert RewardConfig().preset == "csgrpo"
    ep = episode(["<think>look</think><tool_call>{}</tool_call>", "<think>blue</think><answer>B</answer>"], "B", [(4.0, 8.0)])
    assert score_episode(SAMPLE, ep, RewardConfig(preset="default")) == (2.0, {"accuracy": 1.0, "format": 1.0})
    wrong = episode(["<answer>A</answer>"], "A")
    assert score_episode(SAMPLE, wrong, RewardConfig(preset="default")) == (0.0, {"accuracy": 0.0, "format": 0.0})


def test_custom_weights_override_and_drop_components():
    ep = episode(["<think>blue</think><answer>B</answer>"], "B")
    total, parts = score_episode(SAMPLE, ep, RewardConfig(preset="default", weights={"format": 0.5}))
    assert total == 1.5 and parts == {"accuracy": 1.0, "format": 1.0}
    total, parts = score_episode(SAMPLE, ep, RewardConfig(preset="default", weights={"format": 0}))
    assert total == 1.0 and parts == {"accuracy": 1.0, "format": 1.0}  # still reported, not counted


def test_unanswered_episode_scores_zero():
    ep = EpisodeSummary(prediction=None, assistant_turns=["<think>hmm</think>"], calls=[], invalid_calls=2, duration=20.0, truncated=True)
    assert score_episode(SAMPLE, ep, RewardConfig(preset="default"))[0] == 0.0


def test_bad_config_names_the_field():
    with pytest.raises(ValidationError, match="preset"):
        RewardConfig(preset="nope")
    with pytest.raises(ValidationError, match="weights"):
        RewardConfig(weights={"speed": 1.0})


def test_clue_seek_paid_if_correct_keeps_costs_and_drops_credit_of_a_wrong_answer():
    # DeepEyes' conditional tool reward as a csgrpo option: off by default (the paper's reward).
    turns = ["<think>look</think><tool_call>{}</tool_call>", "<think>red</think><answer>A</answer>"]
    good_search = episode(turns, "A", [(4.0, 8.0)])  # the clue exactly, then a wrong answer
    paper = RewardConfig(preset="csgrpo")
    gated = RewardConfig(preset="csgrpo", clue_seek={"paid_if_correct": True})
    assert score_episode(SAMPLE, good_search, paper)[1]["clue_seek"] > 0.5
    assert score_episode(SAMPLE, good_search, gated)[1]["clue_seek"] == 0.0
    wasteful = episode(turns, "A", [(0.0, 20.0), (0.0, 20.0), (0.0, 20.0), (0.0, 20.0), (0.0, 20.0)])
    cost = score_episode(SAMPLE, wasteful, paper)[1]["clue_seek"]
    assert cost < 0 and score_episode(SAMPLE, wasteful, gated)[1]["clue_seek"] == cost
    right = episode(turns[:1] + ["<think>blue</think><answer>B</answer>"], "B", [(4.0, 8.0)])
    assert score_episode(SAMPLE, right, gated) == score_episode(SAMPLE, right, paper)
