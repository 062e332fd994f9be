"""The tiny offline Qwen-VL models: what they are made of, determinism, and the `videoseek tiny-model` command."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest
from transformers import AutoConfig, AutoProcessor

# Until tests/conftest.py imports these too (module fixtures shadow conftest ones: harmless after).
from videoseek.agents.families import FAMILIES, QWEN2_5_VL, QWEN3_VL, family_of
from videoseek.agents.policy import Message
from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE, ConversationRenderer, assistant_message
from videoseek.agents.tiny_model import (
    MANIFEST,
    QWEN_ADDED_TOKENS,
    QWEN_SPECIAL_TOKENS,
    build_tiny_model,
    cache_name,
    ensure_tiny_model,
)
from videoseek.cli import main


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_it_is_a_small_qwen_vl_of_its_family_with_qwens_tokens(family_model_dir):
    name, folder = family_model_dir
    family = FAMILIES[name]
    config = AutoConfig.from_pretrained(folder)
    text, vision = config.text_config, config.vision_config
    assert config.model_type == family.model_type and family_of(config) is family
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    assert head_dim == text.hidden_size // text.num_attention_heads == 64  # vLLM's CPU backend needs head_dim 64
    assert text.num_hidden_layers == 2 and vision.depth == 2
    assert sum(text.rope_parameters["mrope_section"]) == head_dim // 2
    processor = AutoProcessor.from_pretrained(folder)
    tok = processor.tokenizer
    assert type(processor).__name__ == family.processor_class and family_of(processor) is family
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert processor.chat_template == VIDEOSEEK_CHAT_TEMPLATE
    # Patch and merge sizes are the family's, in the config and in both processors.
    for part in (processor.image_processor, processor.video_processor):
        assert (part.patch_size, part.merge_size, part.temporal_patch_size) == (family.patch_size, family.merge_size, 2)
    assert (vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size) == (family.patch_size, family.merge_size, 2)
    ids = tok.convert_tokens_to_ids(list(QWEN_SPECIAL_TOKENS + QWEN_ADDED_TOKENS))
    assert ids == list(range(ids[0], ids[0] + len(ids))) and ids[-1] == len(tok) - 1 == text.vocab_size - 1
    assert (config.video_token_id, config.image_token_id) == (tok.convert_tokens_to_ids("<|video_pad|>"), tok.convert_tokens_to_ids("<|image_pad|>"))
    assert config.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    # Byte-level BPE trained on protocol text: the protocol's words are single tokens, any bytes round-trip.
    assert len(tok.tokenize(" crop_video")) <= 2 and tok.convert_tokens_to_ids("<tool_call>") == ids[len(QWEN_SPECIAL_TOKENS)]
    sample = "视频 12.5s ☃ <think>"
    assert tok.decode(tok(sample)["input_ids"]) == sample
    assert json.loads((folder / MANIFEST).read_text())["family"] == name
    size = sum(f.stat().st_size for f in folder.iterdir())
    assert size < 10_000_000


def test_qwen3_vl_has_interleaved_mrope_and_deepstack(tiny_qwen3_model_dir):
    config = AutoConfig.from_pretrained(tiny_qwen3_model_dir)
    rope = config.text_config.rope_parameters  # what transformers 5.10 reads; vLLM checks mrope_interleaved
    assert rope["mrope_section"] == [8, 12, 12] and rope["mrope_interleaved"] is True
    indexes = config.vision_config.deepstack_visual_indexes
    assert indexes and all(0 <= i < config.vision_config.depth for i in indexes)
    assert len(indexes) <= config.text_config.num_hidden_layers  # deepstack feeds the first decoder layers
    video = AutoProcessor.from_pretrained(tiny_qwen3_model_dir).video_processor
    assert type(video).__name__ == "Qwen3VLVideoProcessor"
    token = QWEN3_VL.token_side**2  # bounds in pixels, multiples of one merged 32x32 token
    assert video.size["shortest_edge"] % token == 0 and video.size["longest_edge"] % token == 0


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path, family_model_dir):
    name, folder = family_model_dir
    again = build_tiny_model(tmp_path / "again", seed=0, family=name)
    assert digest(again) == digest(folder)
    other = build_tiny_model(tmp_path / "other", seed=1, family=name)
    assert digest(other)["model.safetensors"] != digest(folder)["model.safetensors"]
    assert json.loads((other / MANIFEST).read_text()) | {"builder": None} == {"builder": None, "build_version": 1, "seed": 1, "family": name}


def test_families_differ_only_where_they_should(tiny_model_dir, tiny_qwen3_model_dir):
    q25, q3 = digest(tiny_model_dir), digest(tiny_qwen3_model_dir)
    assert q25["tokenizer.json"] == q3["tokenizer.json"] and q25["chat_template.jinja"] == q3["chat_template.jinja"]
    assert q25["model.safetensors"] != q3["model.safetensors"]


def test_unknown_family_is_an_error_naming_the_families(tmp_path):
    with pytest.raises(ValueError, match=r"qwen2\.5-vl, qwen3-vl"):
        build_tiny_model(tmp_path / "m", family="qwen4-vl")
    with pytest.raises(ValueError, match="qwen4-vl"):
        ensure_tiny_model(tmp_path, family="qwen4-vl")
    assert not (tmp_path / "m").exists()


def test_cache_folders_name_the_family_and_keep_qwen2_5_vls(tmp_path):
    assert cache_name(0) == cache_name(0, QWEN2_5_VL.name) == "tiny-qwen2_5-vl-seed0-v1"  # existing caches stay valid
    assert cache_name(2, QWEN3_VL.name) == "tiny-qwen3-vl-seed2-v1"
    path = ensure_tiny_model(tmp_path, seed=0, family=QWEN3_VL.name)
    assert path == tmp_path / "tiny-qwen3-vl-seed0-v1" and AutoConfig.from_pretrained(path).model_type == "qwen3_vl"
    stamp = (path / MANIFEST).stat().st_mtime_ns
    assert ensure_tiny_model(tmp_path, seed=0, family=QWEN3_VL.name) == path and (path / MANIFEST).stat().st_mtime_ns == stamp


def test_cli_builds_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["tiny-model", "--out", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert (out / "model.safetensors").is_file() and str(out) in printed and "Qwen2.5-VL" in printed
    assert AutoConfig.from_pretrained(out).model_type == "qwen2_5_vl"  # the default family
    assert main(["tiny-model", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["tiny-model", "--out", str(out), "--force"]) == 0


def test_cli_builds_qwen3_vl(tmp_path, capsys):
    out = tmp_path / "q3"
    assert main(["tiny-model", "--out", str(out), "--family", "qwen3-vl", "--seed", "2"]) == 0
    printed = capsys.readouterr().out
    assert "Qwen3-VL" in printed and "qwen3-vl" in printed and str(out) in printed
    assert AutoConfig.from_pretrained(out).model_type == "qwen3_vl"
    assert json.loads((out / MANIFEST).read_text())["family"] == "qwen3-vl"
    with pytest.raises(SystemExit):
        main(["tiny-model", "--out", str(tmp_path / "x"), "--family", "qwen4-vl"])
    assert "qwen3-vl" in capsys.readouterr().err


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit):
        main(["tiny-model", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--out" in text and "--family {qwen2.5-vl,qwen3-vl}" in text and "default qwen2.5-vl" in text


# ---- the tiny Qwen3-VL end to end: renderer, <t seconds> texts, forward, generate -----------------
def test_qwen3_vl_renders_frame_pair_times_and_runs(tiny_qwen3_model_dir, single_thread_torch):
    import torch
    from transformers import Qwen3VLForConditionalGeneration

    processor = AutoProcessor.from_pretrained(tiny_qwen3_model_dir)
    rng = np.random.default_rng(0)
    user_times, tool_times = [1.0, 1.5, 2.0, 2.5], [12.0, 12.5, 13.0, 13.5]
    frames = lambda: rng.integers(0, 256, (4, 32, 64, 3), dtype=np.uint8)  # noqa: E731
    messages = [
        Message("system", "You look at videos."),
        Message("user", "What moves?", frames(), np.array(user_times)),
        assistant_message('<think>look closer</think><tool_call>{"name": "crop_video", "arguments": {"start": 12, "end": 14}}</tool_call>'),
        Message("tool", "crop_video returned 4 frames.", frames(), np.array(tool_times)),
    ]
    rendered = ConversationRenderer(processor, mode="video").render(messages)
    decoded = processor.tokenizer.decode(rendered["input_ids"][0])
    # Qwen3-VL's processor writes `<{t:.1f} seconds>` before each frame pair, t the pair's mean time.
    labels = re.findall(r"<[0-9.]+ seconds>", decoded)
    times = user_times + tool_times
    assert labels == [f"<{(times[i] + times[i + 1]) / 2:.1f} seconds>" for i in range(0, 8, 2)]
    assert labels[0] == "<1.2 seconds>" and labels[2] == "<12.2 seconds>"  # 1.25 and 12.25 round half to even
    # Each label opens its own <|vision_start|>...<|vision_end|>; the template's wrapper is gone.
    assert len(re.findall(r"<[0-9.]+ seconds><\|vision_start\|>(?:<\|video_pad\|>)+<\|vision_end\|>", decoded)) == 4
    assert decoded.count("<|vision_start|>") == int(rendered["video_grid_thw"][:, 0].sum()) == 4
    assert "second_per_grid_ts" not in rendered  # Qwen3-VL's times are text, not rope spacing

    model = Qwen3VLForConditionalGeneration.from_pretrained(tiny_qwen3_model_dir).eval()
    inputs = {k: rendered[k] for k in ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values_videos", "video_grid_thw")}
    with torch.no_grad():
        logits = model(**inputs).logits
    assert logits.shape == (1, rendered["input_ids"].shape[1], len(processor.tokenizer)) and torch.isfinite(logits).all()
    out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    new = out[0, rendered["input_ids"].shape[1] :]
    assert 1 <= len(new) <= 4 and int(new.max()) < len(processor.tokenizer)
