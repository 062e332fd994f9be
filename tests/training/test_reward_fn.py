"""`compute_score` (verl's custom reward function) on real env episodes, and the records it reads."""

from __future__ import annotations

import json

import pytest
from videoseek.envs.sample import DataError
from videoseek.rewards import RewardConfig, score_episode
from videoseek.training.verl_plugin.records import (
    sample_from_extra_info,
    sample_to_json,
    summary_from_dict,
    summary_to_dict,
)
from videoseek.training.verl_plugin.reward_fn import compute_score, episode_from_response

from reward_fn_episodes import CALL, extra_info_for, play


def test_score_equals_the_env_terminal_reward(index_sample):
    env, env_reward = play(index_sample, [CALL, "<think>green at 12.5s</think><answer>B</answer>"])
    out = compute_score("synthetic", "ignored", "B", extra_info_for(index_sample, env))
    assert out["score"] == pytest.approx(env_reward)
    total, components = score_episode(index_sample, env.summary(), RewardConfig(preset="csgrpo"))
    assert out["score"] == pytest.approx(total)
    assert out["acc"] == 1.0 and out["calls"] == 1.0 and out["coverage"] == pytest.approx(1.0)
    for name in RewardConfig(preset="csgrpo").component_weights():
        assert out[name] == pytest.approx(components[name])


def test_keys_are_the_same_for_every_episode_of_a_preset(index_sample):
    good, _ = play(index_sample, [CALL, "<think>green</think><answer>B</answer>"])
    bad, _ = play(index_sample, ["garbage"] * 10)
    a = compute_score("s", "", "B", extra_info_for(index_sample, good))
    b = compute_score("s", "", "B", extra_info_for(index_sample, bad))
    assert a.keys() == b.keys()
    assert b["acc"] == 0.0 and b["truncated"] == 1.0 and a["score"] > b["score"]


def test_group_reward_and_failure(index_sample):
    env, _ = play(index_sample, ["<think>x</think><answer>B</answer>"], preset="tgrpo")
    total, _ = score_episode(index_sample, env.summary(), RewardConfig(preset="tgrpo"))
    grouped = compute_score("s", "", "B", extra_info_for(index_sample, env, "tgrpo", group_reward=total + 0.3))
    assert grouped["score"] == pytest.approx(total + 0.3) and grouped["group_term"] == pytest.approx(0.3)
    failed = compute_score("s", "", "B", extra_info_for(index_sample, env, "tgrpo", failure="OSError: decode"))
    assert failed["score"] == 0.0 and failed["failed"] == 1.0


def test_rows_not_from_the_agent_loop_score_the_decoded_response(index_sample):
    info = {"sample": sample_to_json(index_sample), "reward_preset": "default"}
    right = compute_score("s", "<think>it is green</think><answer>B</answer>", "B", info)
    wrong = compute_score("s", "<think>it is red</think><answer>A</answer>", "B", info)
    assert right["acc"] == 1.0 and wrong["acc"] == 0.0 and right["score"] > wrong["score"]
    assert episode_from_response("no answer", 3.0).prediction is None


def test_missing_or_bad_sample_names_the_field(index_sample):
    with pytest.raises(DataError, match="extra_info.sample"):
        compute_score("s", "", "B", {"index": 3})
    with pytest.raises(DataError, match="extra_info.sample"):
        sample_from_extra_info({"sample": json.dumps({"id": "x"})})


def test_records_round_trip(index_sample):
    env, _ = play(index_sample, [CALL, "<answer>B</answer>"])
    summary = env.summary()
    assert summary_from_dict(json.loads(json.dumps(summary_to_dict(summary)))) == summary
    assert sample_from_extra_info({"sample": sample_to_json(index_sample)}) == index_sample


ZOOM = '<think>closer</think><tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.25, 0.25, 0.75, 0.75]}}</tool_call>'


def test_zooms_are_scored_and_calls_counted_per_configured_tool(index_sample):
    """A zoom on the key-frame box earns the clue-seek zoom credit through the record as in the env;
    `calls/<tool>` has a key per configured tool (0 for one not called), `calls` counts every accepted call."""
    sample = index_sample.model_copy(update={"key_frames": [{"time": 12.5, "boxes": {"flash": [0.25, 0.25, 0.75, 0.75]}}]})
    sample = type(index_sample).model_validate(sample.model_dump())
    env, env_reward = play(sample, [CALL, ZOOM, "<think>green</think><answer>B</answer>"], tools=["crop_video", "zoom"])
    summary = env.summary()
    assert summary.zooms == [(12.5, [0.25, 0.25, 0.75, 0.75])]
    assert summary_from_dict(json.loads(json.dumps(summary_to_dict(summary)))) == summary
    record = {"tools": ["crop_video", "zoom"], "tool_calls": {"crop_video": 1, "zoom": 1}}
    out = compute_score("s", "", "B", extra_info_for(sample, env, **record))
    assert out["score"] == pytest.approx(env_reward) and out["clue_seek"] == pytest.approx(env.trajectory.reward_components["clue_seek"])
    assert (out["calls"], out["calls/crop_video"], out["calls/zoom"], out["tool_rate/zoom"], out["crop_rate"]) == (2.0, 1.0, 1.0, 1.0, 1.0)
    quiet, _ = play(sample, ["<think>B</think><answer>B</answer>"], tools=["crop_video", "zoom"])
    none = compute_score("s", "", "B", extra_info_for(sample, quiet, **{**record, "tool_calls": {}}))
    assert none.keys() == out.keys() and (none["calls"], none["calls/zoom"], none["crop_rate"]) == (0.0, 0.0, 0.0)


def test_tool_agent_rows_score_the_adapters_record(index_sample):
    """Rows of verl's ToolAgentLoop: the calls the adapters recorded, the tools the export named."""
    from videoseek.training.verl_plugin.records import TOOL_KEY

    index_sample = index_sample.model_copy(update={"duration": 20.0})  # as export-verl writes it
    info = {"sample": sample_to_json(index_sample), "reward_preset": "csgrpo", "tools": ["crop_video", "zoom"],
            TOOL_KEY: {"calls": [[11.5, 14.0]], "call_frames": [[11.8, 12.4, 13.0, 13.6]], "zooms": [[12.5, [0.25, 0.25, 0.75, 0.75]]],
                       "tool_calls": {"crop_video": 1, "zoom": 1}, "invalid_calls": 0, "frames": 5}}  # fmt: skip
    text = f"{CALL}<|im_end|>\n<|im_start|>user\n<tool_response>x</tool_response><|im_end|>\n<|im_start|>assistant\n<answer>B</answer>"
    out = compute_score("s", text, "B", info)
    episode = episode_from_response(text, 20.0, info[TOOL_KEY])
    assert episode.zooms == [(12.5, [0.25, 0.25, 0.75, 0.75])] and episode.calls == [(11.5, 14.0)]
    assert episode.call_frames == [(11.8, 12.4, 13.0, 13.6)]  # what clue_seek.coverage_by "frames" reads
    assert out["score"] == pytest.approx(score_episode(index_sample, episode, RewardConfig(preset="csgrpo"))[0])
    assert (out["calls"], out["calls/crop_video"], out["calls/zoom"]) == (2.0, 1.0, 1.0)
    plain = compute_score("s", "<answer>B</answer>", "B", {"sample": sample_to_json(index_sample)})  # rows of the one-tool days
    assert plain["calls"] == 0.0 and [k for k in plain if k.startswith("calls/")] == ["calls/crop_video"]
