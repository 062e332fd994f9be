"""The tiny offline Qwen2.5-VL: what it is made of, determinism, and the `videoseek tiny-model` command."""

from __future__ import annotations

import hashlib
import json

import pytest
from transformers import AutoConfig, AutoProcessor

from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE
from videoseek.agents.tiny_model import QWEN_ADDED_TOKENS, QWEN_SPECIAL_TOKENS, build_tiny_model
from videoseek.cli import main


def digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_it_is_a_small_qwen2_5_vl_with_qwens_tokens(tiny_model_dir):
    config = AutoConfig.from_pretrained(tiny_model_dir)
    text = config.text_config
    assert config.model_type == "qwen2_5_vl"
    assert text.hidden_size // text.num_attention_heads == 64  # vLLM's CPU backend needs head_dim 64
    assert text.num_hidden_layers == 2 and config.vision_config.depth == 2
    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    tok = processor.tokenizer
    assert type(processor).__name__ == "Qwen2_5_VLProcessor" and type(tok).__name__ == "Qwen2Tokenizer"
    assert processor.chat_template == VIDEOSEEK_CHAT_TEMPLATE
    ids = tok.convert_tokens_to_ids(list(QWEN_SPECIAL_TOKENS + QWEN_ADDED_TOKENS))
    assert ids == list(range(ids[0], ids[0] + len(ids))) and ids[-1] == len(tok) - 1 == text.vocab_size - 1
    assert (config.video_token_id, config.image_token_id) == (tok.convert_tokens_to_ids("<|video_pad|>"), tok.convert_tokens_to_ids("<|image_pad|>"))
    # Byte-level BPE trained on protocol text: the protocol's words are single tokens, any bytes round-trip.
    assert len(tok.tokenize(" crop_video")) <= 2 and tok.convert_tokens_to_ids("<tool_call>") == ids[len(QWEN_SPECIAL_TOKENS)]
    sample = "视频 12.5s ☃ <think>"
    assert tok.decode(tok(sample)["input_ids"]) == sample
    size = sum(f.stat().st_size for f in tiny_model_dir.iterdir())
    assert size < 10_000_000


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path, tiny_model_dir):
    again = build_tiny_model(tmp_path / "again", seed=0)
    assert digest(again) == digest(tiny_model_dir)
    other = build_tiny_model(tmp_path / "other", seed=1)
    assert digest(other)["model.safetensors"] != digest(tiny_model_dir)["model.safetensors"]
    assert json.loads((other / "videoseek_tiny_model.json").read_text())["seed"] == 1


def test_cli_builds_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["tiny-model", "--out", str(out), "--seed", "3"]) == 0
    assert (out / "model.safetensors").is_file() and str(out) in capsys.readouterr().out
    assert main(["tiny-model", "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["tiny-model", "--out", str(out), "--force"]) == 0


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit):
        main(["tiny-model", "--help"])
    assert "--out" in capsys.readouterr().out
