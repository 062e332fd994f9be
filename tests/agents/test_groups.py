"""The group engine (`agents/groups.py`, driven by `agents.rollout.run_rollouts`): each sample's
origin group and its perturbed groups are planned with their own ids and seeds, played, and scored
together; group rewards and GRPO advantages are the group's. Real decoded synthetic videos."""

from __future__ import annotations

import math

import numpy as np
import pytest

from videoseek.agents.groups import plan_group, turn_rewards_of
from videoseek.agents.policy import PolicyInput, PolicyOutput, load_policy
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import OraclePolicy, ScriptedPolicy, tool_call
from videoseek.envs.env import EnvConfig
from videoseek.envs.sample import VideoSample
from videoseek.envs.synth import generate_dataset
from videoseek.rewards import RewardConfig, group_advantages


@pytest.fixture(scope="module")
def synth_samples(tmp_path_factory) -> list[VideoSample]:
    return generate_dataset(tmp_path_factory.mktemp("synth"), n=5, seed=1)


def test_a_group_plan_names_its_episodes_and_seeds_them_by_run_step_and_id(synth_samples):
    sample = next(s for s in synth_samples if s.mask_patterns)
    plans = plan_group(sample, 2, ["mask"], seed=3, step=1)
    assert [p.episode_id for p in plans] == [f"{sample.id}/g0", f"{sample.id}/g1", f"{sample.id}/mask/g0", f"{sample.id}/mask/g1"]
    assert {p.group_id for p in plans} == {sample.id}
    assert [p.perturbation is None for p in plans] == [True, True, False, False]
    assert plans[2].perturbation == plans[3].perturbation  # one mask for the perturbed group
    assert plan_group(sample, 2, ["mask"], seed=3, step=1) == plans  # deterministic
    assert [p.seed for p in plan_group(sample, 2, ["mask"], seed=3, step=2)] != [p.seed for p in plans]  # a new step, new seeds
    assert len({p.seed for p in plans}) == 4


class SeeingOracle(OraclePolicy):
    """The oracle, keeping every frame each episode was shown (what a model policy would see)."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def act(self, batch):
        for inp in batch:
            self.seen[inp.episode_id] = [(m.frames, m.timestamps) for m in inp.messages if m.frames is not None]
        return super().act(batch)


def test_mask_group_sees_black_frames_exactly_in_the_masked_range(synth_samples):
    sample = next(s for s in synth_samples if s.mask_patterns)
    policy = SeeingOracle()
    trajs = run_rollouts([sample], policy, group_size=2, perturbations=["mask"], progress=False, env_config=EnvConfig())
    masked = [t for t in trajs if t.group.role == "perturbed"]
    assert len(masked) == 2 and len([t for t in trajs if t.group.role == "origin"]) == 2
    lo, hi = masked[0].group.perturbation["time_range"]
    black_seen = 0
    for t in trajs:
        for frames, times in policy.seen[t.episode_id]:
            for frame, time in zip(frames, times):
                hidden = t.group.role == "perturbed" and math.floor(lo) <= math.floor(time) <= math.floor(hi)
                assert (frame.max() == 0) == hidden, (t.episode_id, time)
                black_seen += hidden
        for turn in t.turns:
            for f in turn.observation.frames:
                assert f.masked == (t.group.role == "perturbed" and math.floor(lo) <= math.floor(f.t) <= math.floor(hi))
    assert black_seen > 0  # the oracle crops the clue, which the critical pattern hides


def test_group_rewards_and_advantages_for_dmgrpo(synth_samples):
    sample = next(s for s in synth_samples if s.mask_patterns)
    config = EnvConfig(reward=RewardConfig(preset="dmgrpo"))
    # The preset needs the masked group: the runner adds it by itself.
    trajs = run_rollouts([sample], load_policy("random"), group_size=4, env_config=config, progress=False)
    origin = [t for t in trajs if t.group.role == "origin"]
    assert len(origin) == 4 and len(trajs) == 8
    assert all("delta_mask" in t.reward_components for t in origin)
    adv = [t.advantage for t in origin]
    np.testing.assert_allclose(adv, group_advantages([t.reward for t in origin]))
    if len({t.reward for t in origin}) > 1:
        assert abs(sum(adv)) < 1e-6


def test_group_advantages_match_verl():
    torch = pytest.importorskip("torch")
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    rewards = [1.0, 0.0, 2.5, 0.5]
    scores = torch.zeros(4, 3)
    scores[:, -1] = torch.tensor(rewards)
    adv, _ = core_algos.compute_grpo_outcome_advantage(scores, torch.ones(4, 3), np.array(["a"] * 4))
    np.testing.assert_allclose(adv[:, 0].numpy(), group_advantages(rewards), rtol=1e-5)


def test_duplicate_sample_ids_are_refused(synth_samples):
    with pytest.raises(ValueError, match="duplicate sample id"):
        run_rollouts([synth_samples[0], synth_samples[0]], OraclePolicy(), progress=False)


class Script(ScriptedPolicy):
    """Plays the same turns in every episode (a repeated crop and a call without its end are what
    `make learn`'s seed 0 wrote)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def turn(self, inp: PolicyInput) -> PolicyOutput:
        return PolicyOutput(self.texts[inp.turn])


def test_turn_penalty_charges_the_turns_that_repeat_a_crop_or_are_refused(index_sample):
    """`clue_seek.turn_penalty`: a crop repeating an earlier one, a malformed call and a call the tool
    rejects get minus the penalty as their turn reward; a useful crop 1, a fresh miss 0, a think 0."""
    texts = [tool_call(2.0, 4.0), tool_call(2.0, 4.0), '<tool_call>{"name": "crop_video", "arguments": {"start": 5.0}}</tool_call>',
             tool_call(9.0, 3.0), "<think>Where else?</think>", tool_call(11.5, 14.0), "<answer>B</answer>"]
    [episode] = run_rollouts([index_sample], Script(texts), env_config=EnvConfig(max_turns=8), progress=False)
    assert [t.action["type"] for t in episode.turns] == ["tool_call", "tool_call", "invalid", "tool_call", "think", "tool_call", "answer"]
    assert episode.turns[1].call.duplicate_of == 0 and episode.turns[3].call is None  # the repeat, the rejected span
    assert turn_rewards_of(episode.turns, RewardConfig()) == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    penalised = RewardConfig(clue_seek={"turn_penalty": 0.5})
    assert turn_rewards_of(episode.turns, penalised) == [0.0, -0.5, -0.5, -0.5, 0.0, 1.0, 0.0]
