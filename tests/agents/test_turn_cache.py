"""`TurnCache`: a turn continued from the last turn's keys and values generates what prefilling the
whole conversation generates, for both model families, greedy and sampled."""

from __future__ import annotations

import pytest
import torch

from videoseek.agents.hf_policy import TransformersPolicy
from videoseek.agents.policy import PolicyInput
from videoseek.agents.prompting import assistant_message, initial_messages, tool_message
from videoseek.envs import EnvConfig, VideoSeekEnv

pytestmark = pytest.mark.usefixtures("single_thread_torch")
CONFIG = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=8, max_pixels=64 * 32)


def crop(s: float, e: float) -> str:
    return f'<think>look</think><tool_call>{{"name": "crop_video", "arguments": {{"start": {s}, "end": {e}}}}}</tool_call>'


def play(policy: TransformersPolicy, sample, late_join: bool, turns: int = 3) -> list[list[tuple[list[int], list[float]]]]:
    """Three episodes, each turn answered by a crop's frames (so every continued turn brings new
    frames). With `late_join` the third starts at turn 2: that turn's rows split into a whole
    prefill and a continued call, which samples with a seed of its own (so only greedy compares)."""
    live = {}
    for k in range(3):
        env = VideoSeekEnv(sample, CONFIG)
        obs, _ = env.reset(seed=k)
        live[f"ep{k}"] = (env, initial_messages(obs))
    env, messages = live["ep1"]  # one crop ahead of the others: its rows are longer
    messages.append(assistant_message(crop(12, 14)))
    messages.append(tool_message(env.step(messages[-1].text)[0]))
    played: dict[str, list] = {k: [] for k in live}
    for turn in range(turns):
        ids = [k for k in live if k != "ep2" or turn >= 1 or not late_join]
        outputs = policy.act([PolicyInput(sample, live[k][1], live[k][0].evidence, turn, k) for k in ids])
        for k, out in zip(ids, outputs):
            env, messages = live[k]
            played[k].append((list(out.token_ids), list(out.logprobs)))
            messages.append(assistant_message(out.text, out.token_ids))
            # whatever the policy wrote, the tool answers with a crop's frames (a fresh env plays it)
            side = VideoSeekEnv(sample, CONFIG)
            side.reset(seed=0)
            messages.append(tool_message(side.step(crop(2.0 * turn, 2.0 * turn + 3))[0]))
    return [played[k] for k in sorted(played)]


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_continued_turns_generate_what_whole_prefills_generate(family_model_dir, index_sample, temperature):
    _, path = family_model_dir
    runs = {}
    for reuse in (True, False):
        policy = TransformersPolicy(path, max_new_tokens=8, temperature=temperature, seed=3, return_logprobs=True, stop=(), reuse_kv=reuse)
        runs[reuse] = play(policy, index_sample, late_join=temperature == 0)
        if reuse:
            cache = policy.turn_cache
    # the cache served most prompt tokens: turns 2 and 3 of three episodes prefilled only their new messages
    assert cache.reused_tokens > cache.prefilled_tokens > 0
    for continued, whole in zip(runs[True], runs[False]):
        assert [ids for ids, _ in continued] == [ids for ids, _ in whole]
        for (_, a), (_, b) in zip(continued, whole):
            torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-4, rtol=0)


def test_a_changed_history_prefills_whole(tiny_model_dir, index_sample):
    """Held keys and values are used only for the prompt they were computed on: an episode whose
    history was rewritten (same id) is prefilled whole, and gives what a fresh policy gives."""
    policy = TransformersPolicy(tiny_model_dir, max_new_tokens=6, temperature=0.0)
    fresh = TransformersPolicy(tiny_model_dir, max_new_tokens=6, temperature=0.0)
    env = VideoSeekEnv(index_sample, CONFIG)
    obs, _ = env.reset(seed=0)
    messages = initial_messages(obs)
    out = policy.act([PolicyInput(index_sample, messages, env.evidence, 0, "ep")])[0]
    assert policy.turn_cache.lookup(["ep"], [torch.tensor(out.prompt_token_ids + out.token_ids + [0])]) != [None]
    rewritten = [*messages, assistant_message(crop(1, 3))]
    rewritten.append(tool_message(env.step(rewritten[-1].text)[0]))
    rendered = policy.renderer.render(rewritten)["input_ids"][0]
    assert policy.turn_cache.lookup(["ep"], [rendered]) == [None]  # the held turn is not a prefix of this history
    before = policy.turn_cache.reused_tokens
    again = policy.act([PolicyInput(index_sample, rewritten, env.evidence, 1, "ep")])[0]
    assert policy.turn_cache.reused_tokens == before
    assert again.token_ids == fresh.act([PolicyInput(index_sample, rewritten, env.evidence, 1, "ep")])[0].token_ids


def test_a_training_step_drops_the_held_turns(tiny_model_dir, index_sample):
    """Keys and values computed before an optimizer step are stale after it: the next turn prefills whole."""
    policy = TransformersPolicy(tiny_model_dir, max_new_tokens=6, temperature=0.0)
    env = VideoSeekEnv(index_sample, CONFIG)
    obs, _ = env.reset(seed=0)
    messages = initial_messages(obs)
    out = policy.act([PolicyInput(index_sample, messages, env.evidence, 0, "ep")])[0]
    messages.append(assistant_message(out.text, out.token_ids))
    messages.append(tool_message(env.step(out.text)[0]))
    prompt = policy.renderer.render(messages)["input_ids"][0]
    assert policy.turn_cache.lookup(["ep"], [prompt]) != [None]
    with torch.no_grad():
        next(policy.model.parameters()).mul_(1.0)  # an in-place write, as optimizer.step does
    assert policy.turn_cache.lookup(["ep"], [prompt]) == [None]
