"""TransformersPolicy end to end: the tiny Qwen2.5-VL really generating inside the real env."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from videoseek.agents.hf_policy import TransformersPolicy, collate_left_padded, sequence_logprobs, trim_turn
from videoseek.agents.policy import PolicyInput
from videoseek.agents.prompting import assistant_message, initial_messages, tool_message
from videoseek.envs import EnvConfig, VideoSeekEnv

pytestmark = pytest.mark.usefixtures("single_thread_torch")
CONFIG = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=3, max_pixels=64 * 32)


def crop(s, e):
    return f'<think>look</think><tool_call>{{"name": "crop_video", "arguments": {{"start": {s}, "end": {e}}}}}</tool_call>'


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return TransformersPolicy(tiny_model_dir, max_new_tokens=12, temperature=1.0, seed=0, return_logprobs=True)


@pytest.fixture
def env_and_inputs(index_sample):
    """Two live episodes: one fresh, one after a crop (so its prompt has two videos)."""
    envs, inputs = [], []
    for k in range(2):
        env = VideoSeekEnv(index_sample, CONFIG)
        obs, _ = env.reset(seed=k)
        messages = initial_messages(obs)
        if k == 1:
            messages.append(assistant_message(crop(12, 14)))
            obs, *_ = env.step(messages[-1].text)
            messages.append(tool_message(obs))
        envs.append(env)
        inputs.append(PolicyInput(index_sample, messages, env.evidence, len(env.trajectory.turns), f"ep{k}"))
    return envs, inputs


def closed(token_ids, end_id):
    return token_ids if token_ids[-1:] == [end_id] else token_ids + [end_id]


def test_turns_are_generated_parsed_and_frames_appended(policy, env_and_inputs):
    envs, inputs = env_and_inputs
    for turn in range(2):
        outputs = policy.act(inputs)
        for env, item, out in zip(envs, inputs, outputs):
            assert 0 < len(out.token_ids) <= 12 and len(out.logprobs) == len(out.token_ids)
            assert out.prompt_token_ids == policy.renderer.render(item.messages)["input_ids"][0].tolist()
            item.messages.append(assistant_message(out.text, out.token_ids))
            obs, _, terminated, truncated, info = env.step(out.text)
            assert env.trajectory.turns[-1].assistant == out.text
            assert info["action"]["type"] in {"think", "invalid", "crop_video", "answer"}
            if not (terminated or truncated):
                item.messages.append(tool_message(obs))
    # The episode with a crop carries its frames into every later prompt as a second video.
    rendered = policy.renderer.render(inputs[1].messages)
    assert rendered["video_grid_thw"].shape[0] == 2 and len(rendered["assistant_spans"]) == 3


def test_rerendering_reproduces_the_generated_ids_and_their_logprobs(policy, env_and_inputs):
    _, inputs = env_and_inputs
    outputs = policy.act(inputs)
    for item, out in zip(inputs, outputs):
        finished = item.messages + [assistant_message(out.text, out.token_ids)]
        rendered = policy.renderer.render(finished, add_generation_prompt=False)
        start, end = rendered["assistant_spans"][-1]
        assert rendered["input_ids"][0, :start].tolist() == out.prompt_token_ids
        assert rendered["input_ids"][0, start:end].tolist() == closed(out.token_ids, policy.end_of_turn_id)
        # Teacher forcing the finished conversation gives the log-probs seen while sampling in the
        # left-padded batch: same tokens, same 3D rope positions, same frames.
        replayed = sequence_logprobs(policy.model, rendered)[-1][: len(out.logprobs)]
        torch.testing.assert_close(replayed, torch.tensor(out.logprobs), atol=1e-4, rtol=1e-4)


def test_placeholders_in_the_batch_match_the_pixel_values(policy, env_and_inputs):
    _, inputs = env_and_inputs
    rendered = [policy.renderer.render(item.messages) for item in inputs]
    batch = collate_left_padded(rendered, policy.pad_token_id)
    merge = policy.processor.video_processor.merge_size**2
    assert batch["input_ids"].shape[0] == 2 and batch["input_ids"][0, 0] == policy.pad_token_id  # left padded
    assert int((batch["input_ids"] == policy.processor.video_token_id).sum()) == batch["pixel_values_videos"].shape[0] // merge
    assert int(batch["attention_mask"].sum()) == sum(r["input_ids"].shape[1] for r in rendered)


def test_batched_greedy_equals_one_at_a_time(tiny_model_dir, env_and_inputs):
    greedy = TransformersPolicy(tiny_model_dir, max_new_tokens=8, temperature=0.0)
    _, inputs = env_and_inputs
    together = greedy.act(inputs)
    alone = [greedy.act([item])[0] for item in inputs]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]


def test_sampling_is_seeded_by_episode_and_turn(policy, env_and_inputs):
    _, inputs = env_and_inputs
    first, again = policy.act(inputs), policy.act(inputs)
    assert [o.token_ids for o in first] == [o.token_ids for o in again]
    other = [PolicyInput(i.sample, i.messages, i.evidence, i.turn + 1, i.episode_id) for i in inputs]
    assert [o.token_ids for o in policy.act(other)] != [o.token_ids for o in first]


def test_no_special_token_but_the_turn_end_is_ever_written(tiny_model_dir, env_and_inputs):
    hot = TransformersPolicy(tiny_model_dir, max_new_tokens=48, temperature=3.0, stop=())
    _, inputs = env_and_inputs
    special = {int(i) for i, t in hot.tokenizer.added_tokens_decoder.items() if t.special}
    for out in hot.act(inputs * 2):
        assert not (special - {hot.end_of_turn_id}) & set(out.token_ids)
        assert hot.end_of_turn_id not in out.token_ids[:-1]


def test_a_stop_string_ends_the_turn(tiny_model_dir, env_and_inputs):
    stopping = TransformersPolicy(tiny_model_dir, max_new_tokens=48, temperature=1.0, stop=("e",))
    _, inputs = env_and_inputs
    outputs = stopping.act(inputs)
    assert any("e" in o.text for o in outputs)
    for out in outputs:
        if "e" in out.text:
            assert out.text.index("e") >= len(stopping.tokenizer.decode(out.token_ids[:-1]))


def test_images_mode_generates_from_labelled_frames(tiny_model_dir, env_and_inputs):
    images = TransformersPolicy(tiny_model_dir, mode="images", max_new_tokens=4)
    _, inputs = env_and_inputs
    rendered = images.renderer.render(inputs[1].messages)
    assert rendered["image_grid_thw"].shape[0] == 8 and "Frame at 12." in rendered["text"]
    assert all(len(o.token_ids) >= 1 for o in images.act(inputs))


def test_trim_turn_keeps_the_turn_end_and_drops_other_stops():
    assert trim_turn([5, 6, 2, 9], end_of_turn_id=2, stop_ids={3}) == [5, 6, 2]
    assert trim_turn([5, 3, 3], end_of_turn_id=2, stop_ids={3}) == [5]
    assert trim_turn([5, 6], end_of_turn_id=2, stop_ids={3}) == [5, 6]


def test_bad_arguments_are_named(tmp_path, tiny_model_dir):
    with pytest.raises(FileNotFoundError, match="no model at"):
        TransformersPolicy(tmp_path)
    with pytest.raises(ValueError, match="top_p"):
        TransformersPolicy(tiny_model_dir, top_p=0)
    with pytest.raises(ValueError, match="dtype"):
        TransformersPolicy(tiny_model_dir, dtype="float7")


def test_runs_inside_the_rollout_runner(tiny_model_dir, index_sample, tmp_path):
    from videoseek.agents.rollout import run_rollouts
    from videoseek.envs.trajectory import read_trajectories

    model = TransformersPolicy(tiny_model_dir, max_new_tokens=8)
    trajs = run_rollouts([index_sample], model, group_size=2, env_config=CONFIG, out_dir=tmp_path, progress=False)
    assert len(trajs) == 2 and all(t.failure is None for t in trajs)
    assert all(turn.tokens["completion"] > 0 for t in trajs for turn in t.turns)
    assert len(read_trajectories(tmp_path)) == 2 and np.isfinite([t.reward for t in trajs]).all()
