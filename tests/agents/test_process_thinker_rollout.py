"""ProcessThinker continuations driven by a policy inside rollouts (seed 004, eq. 2)."""

from __future__ import annotations

import pytest

from step_policy import STEPS, StepPolicy
from videoseek.agents.policy import PolicyInput, PolicyOutput
from videoseek.agents.rollout import run_rollouts
from videoseek.envs.env import EnvConfig
from videoseek.envs.synth import generate_dataset
from videoseek.rewards import RewardConfig
from videoseek.rewards.process_thinker import rollout_process_reward


@pytest.fixture(scope="module")
def mc_sample(tmp_path_factory):
    samples = generate_dataset(tmp_path_factory.mktemp("pt"), n=3, seed=4, kinds=["flash_shape"], max_duration=20)
    return samples[0]


def test_success_rates_come_from_sampled_continuations(mc_sample):
    policy = StepPolicy()
    config = EnvConfig(reward=RewardConfig(preset="processthinker"))
    trajs = run_rollouts([mc_sample], policy, group_size=2, env_config=config, progress=False)
    m = config.reward.process_thinker.num_continuations
    assert len(policy.prefixes) == 2 * 3 * m
    # prefixes end right after each </step>, inside the same turn
    assert sorted(set(policy.prefixes), key=len) == [
        "<think>" + "".join(f"<step>{s}</step>" for s in STEPS[:i]) for i in (1, 2, 3)
    ]
    for t in trajs:
        assert t.metrics["success_rates"] == [0.0, 1.0, 1.0]
        expected = rollout_process_reward(t.turns[-1].assistant, 1.0, success_rates=[0.0, 1.0, 1.0])
        assert t.reward_components["process_thinker"] == pytest.approx(expected)
        assert t.reward == pytest.approx(expected)


def test_no_continuations_for_a_response_without_steps(mc_sample):
    class Plain(StepPolicy):
        def act(self, batch):
            self.prefixes.extend(inp.prefix for inp in batch if inp.prefix)
            return [PolicyOutput(f"<think>x</think><answer>{inp.sample.answer}</answer>") for inp in batch]

    policy = Plain()
    trajs = run_rollouts([mc_sample], policy, env_config=EnvConfig(reward=RewardConfig(preset="processthinker")), progress=False)
    assert policy.prefixes == [] and trajs[0].reward_components["process_thinker"] == 0.0


def test_model_policy_continues_a_prefix(mc_sample, tiny_model_dir, single_thread_torch):
    from videoseek.agents.hf_policy import TransformersPolicy
    from videoseek.agents.prompting import initial_messages
    from videoseek.envs.env import VideoSeekEnv

    policy = TransformersPolicy(tiny_model_dir, max_new_tokens=6, temperature=1.0, max_pixels=56 * 56, min_pixels=28 * 28)
    env = VideoSeekEnv(mc_sample, EnvConfig(max_pixels=56 * 56))
    obs, _ = env.reset(seed=0)
    messages = initial_messages(obs)
    prefix = "<think><step>I look.</step>"
    plain, cont = policy.act([PolicyInput(mc_sample, messages, env.evidence, 0, "e"), PolicyInput(mc_sample, messages, env.evidence, 0, "e", prefix=prefix)])
    prefix_ids = policy.tokenizer(prefix, add_special_tokens=False)["input_ids"]
    assert cont.prompt_token_ids[: len(plain.prompt_token_ids)] == plain.prompt_token_ids
    assert cont.prompt_token_ids[len(plain.prompt_token_ids) :] == prefix_ids
    assert len(cont.token_ids) >= 1
