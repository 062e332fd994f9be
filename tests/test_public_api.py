"""Researcher-facing API details (issue 14): one default reward preset, instructions at reset,
turn numbers, registration on `import videoseek`, render modes and reprs, CLI labels, --version
and option help. Real env, real decoded video (the index video of conftest), no mocks."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

from videoseek.cli import COMMANDS, build_parser, main
from videoseek.envs import Answer, CropVideo, EnvConfig, VideoSeekEnv
from videoseek.envs.protocol import CROP_VIDEO_TOOL, SYSTEM_PROMPT
from videoseek.rewards import RewardConfig


def crop(s, e):
    return f'<tool_call>{{"name": "crop_video", "arguments": {{"start": {s}, "end": {e}}}}}</tool_call>'


def subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(only=name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


# ---- 1. one default reward preset ---------------------------------------------------------------
def test_csgrpo_is_the_default_preset_everywhere(index_sample):
    assert RewardConfig().preset == "csgrpo" and EnvConfig().reward.preset == "csgrpo"
    assert subparser("rollout").get_default("reward") == "csgrpo"
    assert subparser("demo").get_default("reward") == "csgrpo"
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    env.step(crop(12, 13.5))
    _, _, term, _, info = env.step("<think>green flash at 12.5s</think><answer>B</answer>")
    assert term and set(info["reward_components"]) == {"accuracy", "format", "clue_seek", "grounding"}


def test_env_config_takes_a_preset_name_or_a_reward_config():
    assert EnvConfig(reward="dmgrpo").reward == RewardConfig(preset="dmgrpo")
    assert EnvConfig(reward="default").reward.component_weights() == {"accuracy": 1.0, "format": 1.0}
    custom = RewardConfig(preset="prr", weights={"format": 0.5})
    assert EnvConfig(reward=custom).reward == custom
    assert EnvConfig.model_validate({"reward": {"preset": "tgrpo"}}).reward.preset == "tgrpo"
    with pytest.raises(ValidationError, match="unknown reward preset 'nope'"):
        EnvConfig(reward="nope")


# ---- 2. instructions at reset -------------------------------------------------------------------
def test_reset_returns_the_instructions_and_the_tool_schema(index_sample):
    import videoseek.agents.prompting as prompting

    assert prompting.SYSTEM_PROMPT is SYSTEM_PROMPT
    env = VideoSeekEnv(index_sample)
    _, info = env.reset(seed=0)
    assert info["instructions"] == SYSTEM_PROMPT and "<answer>" in info["instructions"]
    assert info["tools"] == [CROP_VIDEO_TOOL] and info["tools"][0]["function"]["name"] == "crop_video"
    info["tools"][0]["function"]["name"] = "changed"  # a copy: the protocol constant stays intact
    assert CROP_VIDEO_TOOL["function"]["name"] == "crop_video"


def test_envs_do_not_import_agents():
    code = "import sys, videoseek.envs; print(sorted(m for m in sys.modules if m.startswith('videoseek.agents')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---- 3. turn numbers ----------------------------------------------------------------------------
def test_info_turn_is_the_index_of_the_turn_just_played(index_sample):
    env = VideoSeekEnv(index_sample)
    _, info = env.reset(seed=0)
    assert info["turn"] == 0
    for k, action in enumerate(["<think>hmm</think>", crop(12, 13.5), "<think>green</think><answer>B</answer>"]):
        info = env.step(action)[4]
        assert info["turn"] == k == env.trajectory.turns[-1].index


# ---- 4. registration on `import videoseek`, quiet passive checker ------------------------------
def test_gym_make_works_after_import_videoseek_and_is_quiet(index_sample):
    code = textwrap.dedent(
        f"""
        import json, sys, warnings
        import gymnasium as gym
        import videoseek
        assert "videoseek.envs" not in sys.modules
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = gym.make("videoseek/VideoSeek-v0", sample=json.loads({index_sample.model_dump_json()!r}))
            obs, info = env.reset(seed=0)
            env.step('<tool_call>{{"name": "crop_video", "arguments": {{"start": 12, "end": 13.5}}}}</tool_call>')
            env.step("<think>green</think><answer>B</answer>")
        print(json.dumps({{"frames": list(obs["frames"].shape), "warnings": [str(w.message) for w in caught]}}))
        """
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out == {"frames": [8, 96, 192, 3], "warnings": []}


def test_observations_are_in_the_space_without_casting_warnings(index_sample):
    env = VideoSeekEnv(index_sample)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        obs = env.step(crop(12, 13.5))[0]
        assert env.observation_space.contains(obs) and len(obs["timestamps"]) > 0
    assert not [w for w in caught if "Casting" in str(w.message)]


# ---- 5. render, reprs, structured answers, step before reset -----------------------------------
def test_render_modes_are_declared_and_checked(index_sample):
    assert VideoSeekEnv.metadata["render_modes"] == ["rgb_array", "ansi"]
    with pytest.raises(ValueError, match="render_mode 'human'"):
        VideoSeekEnv(index_sample, render_mode="human")
    assert VideoSeekEnv(index_sample).render() is None


def test_ansi_render_summarises_the_episode(index_sample):
    env = VideoSeekEnv(index_sample, render_mode="ansi")
    env.reset(seed=0)
    obs = env.step(crop(12, 13.5))[0]
    text = env.render()
    assert isinstance(text, str)
    assert "sample idx-1" in text and "turn 1/8" in text and "frames 16/64" in text and obs["text"] in text


def test_rgb_array_render_labels_each_frame_with_its_time(index_sample):
    env = VideoSeekEnv(index_sample, render_mode="rgb_array")
    obs, _ = env.reset(seed=0)
    sheet = env.render()
    n, h, w, _ = obs["frames"].shape
    assert sheet.shape == (h, n * w, 3) and sheet.dtype == np.uint8
    tiles = [sheet[:, i * w : (i + 1) * w] for i in range(n)]
    for tile, frame in zip(tiles, obs["frames"]):
        assert not np.array_equal(tile[:14, :40], frame[:14, :40])  # the label is burnt in top-left
        assert np.array_equal(tile[20:, 60:], frame[20:, 60:])  # the rest of the frame is untouched
    assert not np.array_equal(tiles[0][:14, :40], tiles[1][:14, :40])  # "1.2s" and "3.8s" differ
    obs = env.step(crop(12, 13.5))[0]  # the sheet follows the last observation with frames
    assert env.render().shape == (h, len(obs["frames"]) * w, 3)


def test_env_and_sample_reprs_are_short(index_sample):
    env = VideoSeekEnv(index_sample)
    assert repr(env) == "VideoSeekEnv(sample='idx-1', turn=0/8, frames=0/64)"
    env.reset(seed=0)
    env.step(crop(12, 13.5))
    assert repr(env) == "VideoSeekEnv(sample='idx-1', turn=1/8, frames=16/64)"
    long = index_sample.model_copy(update={"question": "Which colour flashes?\n" * 100, "reference_reasoning": "x" * 10_000})
    for sample in (index_sample, long):
        text = repr(sample)
        assert "\n" not in text and len(text) <= 200 and "idx-1" in text and "answer='B'" in text


def test_structured_answer_scores_like_its_text(index_sample):
    def components(*actions):
        env = VideoSeekEnv(index_sample)
        env.reset(seed=0)
        for action in actions:
            info = env.step(action)[4]
        return info["reward_components"], env.trajectory.turns[-1].assistant

    for preset in ("csgrpo", "default"):
        structured = VideoSeekEnv(index_sample, EnvConfig(reward=preset))
        structured.reset(seed=0)
        structured.step(CropVideo(12, 13.5))
        a = structured.step(Answer("B"))[4]["reward_components"]
        text = VideoSeekEnv(index_sample, EnvConfig(reward=preset))
        text.reset(seed=0)
        text.step(crop(12, 13.5))
        b = text.step("<answer>B</answer>")[4]["reward_components"]
        assert a == b and a["format"] == 0.0  # no <think>: the same format score either way
    comps, recorded = components(Answer("B"))
    assert recorded == "<answer>B</answer>" and comps == components("<answer>B</answer>")[0]


def test_step_before_reset_says_so(index_sample):
    env = VideoSeekEnv(index_sample)
    with pytest.raises(RuntimeError, match=r"^call reset\(\) before step\(\)$"):
        env.step("<answer>B</answer>")
    env.reset(seed=0)
    env.step("<think>b</think><answer>B</answer>")
    with pytest.raises(RuntimeError, match="finished episode"):
        env.step("<answer>B</answer>")


# ---- 6. eval labels -----------------------------------------------------------------------------
def test_eval_prints_breakdown_labels(index_sample, tmp_path, capsys):
    from videoseek.agents.policy import load_policy
    from videoseek.agents.rollout import run_rollouts

    run = tmp_path / "run"
    run_rollouts([index_sample], load_policy("oracle"), out_dir=run, progress=False)
    assert main(["eval", str(run)]) == 0
    printed = capsys.readouterr().out
    assert "accuracy[multiple_choice]" in printed and "accuracy[test]" in printed


# ---- 8. --version and option help ---------------------------------------------------------------
def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"videoseek {importlib.metadata.version('videoseek')}"


def assert_options_explained(name: str, parser: argparse.ArgumentParser) -> None:
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flag = "/".join(action.option_strings) or action.dest
        assert action.help, f"{name} {flag}: no help text"
        if action.option_strings and action.nargs != 0 and action.default not in (None, [], False):
            shown = formatter._expand_help(action)
            assert re.search(r"(\(|; )default\b", shown), f"{name} {flag}: help does not show the default: {shown!r}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_has_help_and_shows_its_default(name):
    assert_options_explained(name, subparser(name))


def script_parser(module) -> argparse.ArgumentParser:
    """The parser a training script's `parse_args` builds (caught before it parses)."""
    class Built(Exception):
        pass

    def catch(parser, *args, **kwargs):
        raise Built(parser)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(argparse.ArgumentParser, "parse_args", catch)
        with pytest.raises(Built) as built:
            module.parse_args([])
    return built.value.args[0]


@pytest.mark.parametrize("script", ["run_csgrpo", "run_sft", "learn"])
def test_training_scripts_explain_every_option_and_list_every_preset(script):
    import importlib

    from videoseek.rewards import PRESETS

    parser = script_parser(importlib.import_module(f"videoseek.training.{script}"))
    assert_options_explained(script, parser)
    reward = next((a for a in parser._actions if "--reward" in a.option_strings), None)
    if reward is not None:
        assert list(reward.choices) == list(PRESETS)  # sfgrpo and default too


def test_rollout_help_shows_the_default_preset():
    parser = subparser("rollout")
    reward = next(a for a in parser._actions if "--reward" in a.option_strings)
    assert parser._get_formatter()._expand_help(reward).endswith("(default: csgrpo)")
