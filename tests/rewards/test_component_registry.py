"""A reward component is one file and one registration (issue 36, item 5): compose scores it, the
rollout driver scores and records it, a dumped config loads it in a fresh process, the drivers read
its capability flag (continuations) and the viewer its gate, with no other file touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from step_policy import StepPolicy
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import OraclePolicy
from videoseek.envs.env import EnvConfig
from videoseek.envs.synth import generate_dataset
from videoseek.rewards import (
    REWARD_COMPONENTS,
    ComponentParams,
    EpisodeSummary,
    RewardComponent,
    RewardConfig,
    get_component,
    register_component,
    score_episode,
    score_group,
)
from videoseek.rewards.compose import total_reward
from videoseek.rewards.registry import unregister_component
from videoseek.viewer.rewardinfo import explain_reward, reward_line

ROOT = Path(__file__).resolve().parents[2]
BREVITY = "examples/custom_reward.py:Brevity"  # the one-file component, by its path from the repository root


class Sample:
    problem_type, answer, options, duration = "multiple_choice", "B", ["A. red", "B. blue"], 10.0
    clue_intervals, key_frames = [], []


def episode(thinking: str, answer: str = "B") -> EpisodeSummary:
    return EpisodeSummary(answer, [f"<think>{thinking}</think><answer>{answer}</answer>"], [], 0, 10.0)


@pytest.fixture
def registry(monkeypatch):
    """Components registered in a test are gone after it (the registry is process-wide)."""
    monkeypatch.chdir(ROOT)  # import paths of files are relative to the current directory
    before = list(REWARD_COMPONENTS)
    yield
    for name in [n for n in REWARD_COMPONENTS if n not in before]:
        unregister_component(name)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return generate_dataset(tmp_path_factory.mktemp("registry"), n=2, seed=3, kinds=["flash_shape"], max_duration=20)


def test_a_component_from_one_file_is_scored_by_compose(registry):
    config = RewardConfig(preset="csgrpo", components=[BREVITY], weights={"brevity": 0.5}, brevity={"max_words": 4})
    assert "brevity" in REWARD_COMPONENTS and get_component("brevity") is get_component(BREVITY)
    total, parts = score_episode(Sample, episode("the flash is blue and round"), config)  # 6 words
    assert parts["brevity"] == pytest.approx(4 / 6)
    assert list(parts) == ["accuracy", "format", "clue_seek", "grounding", "brevity"]  # registration order
    assert total == pytest.approx(total_reward(parts, config)) and total == pytest.approx(1 + 1 + parts["clue_seek"] + parts["grounding"] + 0.5 * 4 / 6)
    assert config.brevity.max_words == 4 and config.params("brevity") == config.brevity
    assert RewardConfig(components=[BREVITY]).brevity.max_words == 60  # its Params' default
    # in a group too, and with its weight 0 it is reported, not counted
    [(t, p)] = score_group(Sample, [episode("blue")], None, RewardConfig(preset="default", weights={"brevity": 0.0}))
    assert p["brevity"] == 1.0 and t == 2.0
    with pytest.raises(ValidationError, match="brevity.max_words"):
        RewardConfig(brevity={"max_words": 0})
    with pytest.raises(ValidationError, match="brevity.limit"):
        RewardConfig(brevity={"limit": 3})
    with pytest.raises(ValidationError, match="nonsense"):
        RewardConfig(nonsense={})


def test_the_rollout_driver_scores_and_records_it(registry, samples, tmp_path):
    config = EnvConfig(reward=RewardConfig(preset="default", components=[BREVITY], weights={"brevity": 1.0}))
    trajs = run_rollouts(samples, OraclePolicy(), group_size=2, env_config=config, out_dir=tmp_path, progress=False)
    assert len(trajs) == 4
    for t in trajs:
        assert set(t.reward_components) == {"accuracy", "format", "brevity"}
        assert 0.0 < t.reward_components["brevity"] <= 1.0
        assert t.reward == pytest.approx(sum(t.reward_components.values()))
    written = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert [w["reward_components"]["brevity"] for w in written] == [t.reward_components["brevity"] for t in trajs]


def test_a_dumped_config_loads_where_nothing_imported_the_component(registry):
    config = RewardConfig(preset="default", components=[BREVITY], weights={"brevity": 0.5}, brevity={"max_words": 7})
    dumped = config.model_dump_json()
    assert json.loads(dumped)["components"] == [BREVITY]
    assert "components" not in RewardConfig().model_dump()  # a built-in config dumps as it always did
    code = (
        "import sys; from videoseek.rewards import RewardConfig, REWARD_COMPONENTS\n"
        "assert 'brevity' not in REWARD_COMPONENTS\n"
        "c = RewardConfig.model_validate_json(sys.stdin.read())\n"
        "print(c.brevity.max_words, c.component_weights()['brevity'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=dumped, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7", "0.5"]


def test_the_driver_samples_continuations_for_any_component_that_needs_them(registry, samples):
    @register_component
    class MeanSuccess(RewardComponent):  # not ProcessThinker: the driver reads the flag, not a name
        name = "mean_success"
        needs_continuations = True

        def score(self, ctx):
            rates = ctx.success_rates or []
            return sum(rates) / len(rates) if rates else -1.0

    reward = RewardConfig(preset="default", weights={"mean_success": 1.0})
    assert reward.needs_continuations() and not RewardConfig(preset="default").needs_continuations()
    policy = StepPolicy()
    trajs = run_rollouts(samples[:1], policy, env_config=EnvConfig(reward=reward), progress=False)
    m = reward.process_thinker.num_continuations  # the step-prefix sampler's M
    assert len(policy.prefixes) == 3 * m
    assert trajs[0].metrics["success_rates"] == [0.0, 1.0, 1.0]
    assert trajs[0].reward_components["mean_success"] == pytest.approx(2 / 3)


def test_a_gated_component_is_zeroed_by_its_gate_and_the_viewer_is_served_the_gate(registry):
    class Tidy(ComponentParams):
        bonus: float = 1.0

    @register_component
    class TidyBonus(RewardComponent):
        name = "tidy_bonus"
        Params = Tidy
        gated_by = "ref_delta_format"

        def score(self, ctx):
            return ctx.params.bonus

    config = RewardConfig(preset="default", weights={"tidy_bonus": 1.0}, format_gate=0.5)
    assert config.gates() == {"tidy_bonus": "ref_delta_format"}
    total, parts = score_episode(Sample, episode("no structure"), config)  # Ref-Delta format 0.3 < 0.5
    assert parts["ref_delta_format"] == pytest.approx(0.3) and parts["tidy_bonus"] == 0.0 and total == 2.0
    rows = {r["name"]: r for r in explain_reward(parts, total, config, "run.json")["rows"]}
    assert rows["tidy_bonus"]["gate"] == {"threshold": 0.5, "by": "ref_delta_format", "value": pytest.approx(0.3), "open": False}
    assert rows["ref_delta_format"]["gates"] == ["tidy_bonus"]
    assert reward_line(config, "run.json")["gates"] == [{"component": "tidy_bonus", "by": "ref_delta_format", "threshold": 0.5}]
    assert reward_line(RewardConfig(preset="dmgrpo"), "x")["gates"] == [
        {"component": "timestamp", "by": "ref_delta_format", "threshold": 0.4},
        {"component": "delta_mask", "by": "ref_delta_format", "threshold": 0.4},
    ]
    # the page draws what it is served: no component or gate is named in app.js
    app = (ROOT / "viewer" / "static" / "app.js").read_text(encoding="utf-8")
    assert "ref_delta_format" not in app and "delta_mask" not in app


def test_registration_refuses_what_would_be_ambiguous(registry):
    class Other(RewardComponent):
        name = "accuracy"

    with pytest.raises(ValueError, match="already registered"):
        register_component(Other)
    for bad in ("weights", "preset", "not an identifier", ""):
        with pytest.raises(ValueError, match="identifier and no RewardConfig field"):
            register_component(type("Bad", (RewardComponent,), {"name": bad}))
    with pytest.raises(ValueError, match="pydantic model"):
        register_component(type("BadParams", (RewardComponent,), {"name": "bad_params", "Params": dict}))
    with pytest.raises(ValueError, match="RewardComponent subclass"):
        register_component(dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown reward component 'nope'"):
        get_component("nope")
    with pytest.raises(ValueError, match="cannot be imported"):
        get_component("examples/no_such_file.py:Brevity")
    with pytest.raises(ValidationError, match="cannot be imported"):
        RewardConfig(components=["examples/no_such_file.py:Brevity"])
    assert "bad_params" not in REWARD_COMPONENTS
