"""Tool-use collapse is visible: crop rate, calls per episode and format validity every step, on the
local backend and in verl's reward extras, and one warning when the crop rate stays low.
(`tests/envs/test_metrics.py` checks that every path computes the same numbers.)"""

from __future__ import annotations

import json

import pytest

from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import SCRIPTED
from videoseek.training.local_backend.collapse import CollapseWatch, call_push, tool_use_metrics


def test_watch_warns_once_after_n_low_steps_in_a_row():
    watch = CollapseWatch(threshold=0.1, steps=3)
    rates = [0.5, 0.0, 0.05, 0.2, 0.0, None, 0.0, 0.09, 0.0, 0.0, 0.0]  # a high step resets, None neither counts nor resets
    warnings = [(step, watch.update(step, r)) for step, r in enumerate(rates, start=1)]
    fired = [(step, w) for step, w in warnings if w]
    assert len(fired) == 1 and fired[0][0] == 8
    assert "below 0.1 for 3 steps in a row" in fired[0][1] and "steps 6-8" in fired[0][1]
    with pytest.raises(ValueError, match="threshold"):
        CollapseWatch(threshold=1.5)
    with pytest.raises(ValueError, match="steps"):
        CollapseWatch(steps=0)


def test_tool_use_metrics_of_a_cropping_and_a_non_cropping_policy(index_sample, tmp_path):
    oracle = run_rollouts([index_sample], SCRIPTED["oracle"](), group_size=2, out_dir=tmp_path / "o", progress=False)
    blind = run_rollouts([index_sample], SCRIPTED["no-tool"](), group_size=2, out_dir=tmp_path / "n", progress=False)
    seen = tool_use_metrics(oracle)
    assert seen["crop_rate"] == 1.0 and seen["calls"] >= 1.0 and seen["valid_format"] == 1.0
    assert tool_use_metrics(blind) == {"calls": 0.0, "crop_rate": 0.0, "invalid_calls": 0.0, "valid_format": 1.0, "turns": 1.0, "tokens": 0.0}
    assert tool_use_metrics(blind, ["crop_video"])["tool_rate/crop_video"] == 0.0  # a configured tool has its keys, called or not
    assert tool_use_metrics([]) == {}


def test_call_push_names_the_term_that_favours_fewer_crops(index_sample, tmp_path):
    # One group: a real cropping episode and a real blind one. Accuracy pays the crop; a search
    # cost charged to the cropping episode alone pushes the other way, and GRPO's std makes a
    # term that alone varies in a group count in full whatever its weight (Dr. GRPO's does not).
    crop = run_rollouts([index_sample], SCRIPTED["oracle"](), out_dir=tmp_path / "o", progress=False)[0]
    blind = run_rollouts([index_sample], SCRIPTED["no-tool"](), out_dir=tmp_path / "n", progress=False)[0]
    group = [t.model_copy(update={"group": t.group.model_copy(update={"id": "g"})}) for t in (crop, blind)]
    assert tool_use_metrics(group[:1])["calls"] >= 1 and tool_use_metrics(group[1:])["calls"] == 0
    weights = {"accuracy": 1.0, "clue_seek": 0.25}
    group[0].reward_components, group[1].reward_components = {"accuracy": 1.0, "clue_seek": -0.5}, {"accuracy": 0.0, "clue_seek": 0.0}
    push = call_push(group, weights)
    assert push["push/calls/accuracy"] > 0 > push["push/calls/clue_seek"]
    group[1].reward_components = {"accuracy": 1.0, "clue_seek": 0.0}  # both right: only the search cost varies
    normed, plain = call_push(group, weights), call_push(group, weights, norm_by_std=False)
    assert normed["push/calls/accuracy"] == 0.0 == plain["push/calls/accuracy"]
    assert normed["push/calls/clue_seek"] < 4 * plain["push/calls/clue_seek"] < 0  # std-normalised: full size; Dr. GRPO: the weight's share
    assert call_push(group[:1], weights) == {"push/calls/accuracy": 0.0, "push/calls/clue_seek": 0.0} and call_push([], weights) == {}


def test_local_grpo_logs_tool_use_every_step_and_warns_once(tmp_path, index_sample, capsys):
    pytest.importorskip("verl")
    import torch
    import yaml

    from videoseek.agents.tiny_model import ensure_tiny_model
    from videoseek.envs.sample import write_jsonl
    from videoseek.training import run_csgrpo

    tiny = ensure_tiny_model(cache_dir=tmp_path / "models")
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump({"max_turn_tokens": 12, "group_size": 2, "batch_size": 1,
                                      "env": {"initial_frames": 2, "frames_per_call": 2, "max_turns": 2, "max_total_frames": 8, "max_pixels": 112 * 112},
                                      "overrides": {"algorithm.norm_adv_by_std_in_grpo": False}}))  # fmt: skip
    before = torch.get_num_threads()
    argv = ["--backend", "local", "--model", str(tiny), "--data", str(data), "--steps", "3", "--config", str(config), "--out", str(tmp_path / "run"),
            "--threads", "1", "--collapse-threshold", "1.0", "--collapse-steps", "2"]  # fmt: skip
    try:
        assert run_csgrpo.main(argv) == 0
    finally:
        torch.set_num_threads(before)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        assert 0.0 <= r["crop_rate"] <= 1.0 and r["calls"] >= 0.0 and 0.0 <= r["valid_format"] <= 1.0
        assert r["tool_rate/crop_video"] == r["crop_rate"] and r["calls/crop_video"] == r["calls"]  # the env's one tool, logged called or not
        assert {"push/calls/accuracy", "push/calls/format"} <= set(r)
    # verl's algorithm.norm_adv_by_std_in_grpo reaches the local update (Dr. GRPO's r - mean) and its record
    assert json.loads((tmp_path / "run" / "rollouts" / "step_0001" / "grpo.json").read_text())["norm_adv_by_std"] is False
    low = [r["crop_rate"] < 1.0 for r in rows]
    err = capsys.readouterr().err
    expected = int(any(a and b for a, b in zip(low, low[1:])))
    assert expected == 1, low  # the random tiny model rarely crops: the warning must fire
    assert err.count("tool use is collapsing") == expected
    assert run_csgrpo.main([*argv[:-4], "--collapse-steps", "0", "--overwrite"]) == 2
    assert "--collapse-steps" in capsys.readouterr().err


def test_verl_reward_extras_carry_crop_rate_and_format(index_sample):
    from reward_fn_episodes import CALL, extra_info_for, play

    from videoseek.training.verl_plugin.reward_fn import compute_score

    env, _ = play(index_sample, [CALL, "<think>green at 12.5s</think><answer>B</answer>"])
    out = compute_score("synthetic", "ignored", "B", extra_info_for(index_sample, env))
    assert out["crop_rate"] == 1.0 and out["valid_format"] == 1.0
    env, _ = play(index_sample, ["<think>no look</think><answer>B</answer>"])
    out = compute_score("synthetic", "ignored", "B", extra_info_for(index_sample, env))
    assert out["crop_rate"] == 0.0 and out["valid_format"] == 1.0


def test_local_dynamic_sampling_refills_groups_without_spread(tmp_path, index_sample):
    # DAPO's dynamic sampling, switched on by verl's own key (algorithm.filter_groups): the random tiny
    # model never writes a valid answer, so every group's rewards are equal; each step asks new questions
    # until max_num_gen_batches, logs the share of such groups and trains on none of them.
    pytest.importorskip("verl")
    import torch
    import yaml

    from videoseek.agents.tiny_model import ensure_tiny_model
    from videoseek.envs.sample import write_jsonl
    from videoseek.envs.trajectory import read_trajectories
    from videoseek.training import run_csgrpo

    tiny = ensure_tiny_model(cache_dir=tmp_path / "models")
    pool = [index_sample.model_copy(update={"id": f"q{i}"}) for i in range(5)]
    data = write_jsonl(pool, tmp_path / "samples.jsonl")
    config = tmp_path / "fast.yaml"
    config.write_text(yaml.safe_dump({"max_turn_tokens": 8, "group_size": 2, "batch_size": 1,
                                      "env": {"initial_frames": 2, "frames_per_call": 2, "max_turns": 1, "max_total_frames": 4, "max_pixels": 112 * 112},
                                      "overrides": {"algorithm.filter_groups.enable": True, "algorithm.filter_groups.max_num_gen_batches": 3}}))  # fmt: skip
    before = torch.get_num_threads()
    try:
        assert run_csgrpo.main(["--backend", "local", "--model", str(tiny), "--data", str(data), "--steps", "2", "--config", str(config),
                                "--out", str(tmp_path / "run"), "--threads", "1"]) == 0  # fmt: skip
    finally:
        torch.set_num_threads(before)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    for step, r in enumerate(rows, start=1):
        played = read_trajectories(tmp_path / "run" / "rollouts" / f"step_{step:04d}")
        assert r["reward"] == 0.0 and r["groups/zero_std_share"] == 1.0
        assert r["groups/gen_batches"] == 3 and r["groups/generated"] == 3 == len({t.sample_id for t in played})
        assert len(played) == 6 and r["episodes"] == 0 and r.get("skipped") == 1.0


def test_per_tool_rates_and_a_warning_that_names_the_envs_tools(index_sample, tmp_path):
    from videoseek.agents.policy import PolicyOutput
    from videoseek.agents.scripted import ScriptedPolicy
    from videoseek.envs.env import EnvConfig
    from videoseek.training.local_backend.rollout import rollout_metrics

    turns = ['<tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.1, 0.1, 0.5, 0.5]}}</tool_call>',
             '<tool_call>{"name": "zoom", "arguments": {"time": 3.0, "box": [0.2, 0.2, 0.4, 0.4]}}</tool_call>',
             "<think>Green.</think><answer>B</answer>"]  # fmt: skip

    class Zoomer(ScriptedPolicy):
        name = "zoomer"

        def turn(self, inp):
            return PolicyOutput(text=turns[sum(m.role == "tool" for m in inp.messages)])

    config = EnvConfig(tools=["crop_video", "zoom"])
    zooms = run_rollouts([index_sample], Zoomer(), group_size=2, env_config=config, out_dir=tmp_path / "z", progress=False)
    crops = run_rollouts([index_sample], SCRIPTED["oracle"](), group_size=2, env_config=config, out_dir=tmp_path / "c", progress=False)
    seen = tool_use_metrics(zooms + crops)  # accepted calls of any tool count, and each tool has its rate
    assert seen["crop_rate"] == 1.0 and seen["tool_rate/zoom"] == 0.5 == seen["tool_rate/crop_video"]
    assert seen["calls"] == (2 * 2 + 2 * len(crops[0].calls)) / 4
    assert seen["calls/zoom"] == 1.0 and seen["calls/crop_video"] == len(crops[0].calls) / 2
    assert seen["calls"] == seen["calls/zoom"] + seen["calls/crop_video"]
    assert not {"calls", "turns"} & set(rollout_metrics(zooms + crops))  # the step row takes them from tool_use_metrics alone
    named, plain = CollapseWatch(threshold=0.5, steps=1, tools=["crop_video", "zoom"]), CollapseWatch(threshold=0.5, steps=1)
    assert named.update(1, 0.0).endswith("the policy answers without calling crop_video or zoom")
    assert plain.update(1, 0.0).endswith("the policy answers without calling a tool")
