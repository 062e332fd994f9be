"""Qwen2.5-VL M-RoPE positions by the sampling rule (`videoseek.agents.rope`) against vLLM's rule and stock transformers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from videoseek.agents.prompting import ConversationRenderer, Message
from videoseek.agents.rope import qwen2_5_vl_rope_index, use_sampling_rope_index
from videoseek.training.gpu_probe import vllm_rule_positions


@pytest.fixture(scope="module")
def model_and_processor(tiny_model_dir):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir).eval()
    return model, AutoProcessor.from_pretrained(tiny_model_dir)


def rendered(processor, clip_times):
    rng = np.random.default_rng(0)
    frames = lambda n: rng.integers(0, 255, (n, 56, 56, 3), dtype=np.uint8)  # noqa: E731
    messages = [
        Message("system", "s"),
        Message("user", "q", frames(4), np.array([0.0, 5.0, 10.0, 15.0])),
        Message("assistant", "<think>look</think>"),
        Message("tool", "r", frames(len(clip_times)), np.array(clip_times)),
        Message("assistant", "<answer>B</answer>"),
    ]
    return ConversationRenderer(processor, mode="video").render(messages, add_generation_prompt=False)


@pytest.mark.parametrize("clip_times", [[11.5, 12.0, 12.5, 13.0], [11.5, 11.8, 12.1, 12.4], [3.0, 3.75, 4.5, 5.25, 6.0, 6.75]])
def test_equals_vllms_rule_and_differs_from_stock_transformers_after_a_video(model_and_processor, clip_times):
    model, processor = model_and_processor
    r = rendered(processor, clip_times)
    ours, deltas = qwen2_5_vl_rope_index(model.model, r["input_ids"], r["mm_token_type_ids"], video_grid_thw=r["video_grid_thw"], second_per_grid_ts=r["second_per_grid_ts"])
    vision = model.config.vision_config
    rule = vllm_rule_positions(r["input_ids"], processor.tokenizer.convert_tokens_to_ids("<|video_pad|>"), r["video_grid_thw"], r["second_per_grid_ts"], vision.tokens_per_second, vision.spatial_merge_size)
    assert torch.equal(ours[:, 0], rule)
    assert int(deltas[0, 0]) == int(rule.max()) + 1 - r["input_ids"].shape[1]  # decode steps continue after the last position
    stock, _ = type(model.model).get_rope_index(model.model, r["input_ids"], r["mm_token_type_ids"], video_grid_thw=r["video_grid_thw"], second_per_grid_ts=r["second_per_grid_ts"])
    first_video = int((r["mm_token_type_ids"][0] == 2).nonzero()[0])
    assert torch.equal(stock[:, 0, :first_video], ours[:, 0, :first_video])  # the two agree up to the first video
    assert not torch.equal(stock, ours)  # transformers 5.10 resumes the text after a video elsewhere


def test_padding_and_batches_follow_transformers_conventions(model_and_processor):
    model, processor = model_and_processor
    r = rendered(processor, [11.5, 12.0, 12.5, 13.0])
    ids, types_ = r["input_ids"], r["mm_token_type_ids"]
    pad = torch.zeros(1, 3, dtype=ids.dtype)
    batch_ids, batch_types = torch.cat([pad, ids], 1), torch.cat([pad, types_], 1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones_like(ids)], 1)
    single, _ = qwen2_5_vl_rope_index(model.model, ids, types_, video_grid_thw=r["video_grid_thw"], second_per_grid_ts=r["second_per_grid_ts"])
    padded, _ = qwen2_5_vl_rope_index(model.model, batch_ids, batch_types, video_grid_thw=r["video_grid_thw"], second_per_grid_ts=r["second_per_grid_ts"], attention_mask=mask)
    assert torch.equal(padded[:, 0, 3:], single[:, 0]) and torch.all(padded[:, 0, :3] == 1)


def test_installed_on_qwen2_5_vl_only(model_and_processor):
    model, _ = model_and_processor
    import copy

    patched = copy.deepcopy(model)
    assert use_sampling_rope_index(patched) and patched.model.get_rope_index.__func__ is qwen2_5_vl_rope_index
    reference = copy.deepcopy(patched)  # the local backend's frozen reference keeps the rule, bound to itself
    assert reference.model.get_rope_index.__self__ is reference.model
    assert not use_sampling_rope_index(object())
