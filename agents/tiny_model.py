"""A tiny random Qwen-VL built offline: `videoseek tiny-model --out DIR [--family qwen3-vl]`.

Hubs are unreachable from tests and CI, so tests, the demo and the embedded default build their
own checkpoint in about a second (no download, 5 MB; 8 MB for Qwen3-VL):

- tokenizer: a byte-level BPE trained with `tokenizers` on text generated from the VideoSeek
  action protocol (system prompt, tool schema, questions, thinking, tool calls, tool responses,
  answers), through Qwen2's normaliser and pre-tokenizer regex, wrapped as `Qwen2Tokenizer`,
  with Qwen2.5-VL's added tokens in Qwen's order (`<|endoftext|>`, `<|im_start|>`,
  `<|im_end|>`, ..., `<|vision_start|>`, `<|image_pad|>`, `<|video_pad|>`, `<tool_call>`, ...).
- processor: `Qwen2_5_VLProcessor` with `Qwen2VLImageProcessor` and `Qwen2VLVideoProcessor`
  (Qwen's 14 px patches, 2x2 merge, 2-frame temporal patches; small pixel bounds), and
  `VIDEOSEEK_CHAT_TEMPLATE` as its chat template.
- model: `Qwen2_5_VLForConditionalGeneration`, 2 decoder layers, hidden 128, 2 attention heads
  (head_dim 64, which vLLM's CPU backend requires), a 2-block vision tower; random weights from
  `torch.manual_seed(seed)`.

`--family qwen3-vl` (see `agents.families`) builds the same way with the same tokenizer (Qwen's
special tokens are shared): `Qwen3VLProcessor` with `Qwen2VLImageProcessor` and
`Qwen3VLVideoProcessor` (16 px patches, 2x2 merge, 2-frame temporal patches), and
`Qwen3VLForConditionalGeneration` (2 layers, hidden 128, 2 heads of 64, interleaved M-RoPE with
sections [8, 12, 12], a 2-block vision tower with deepstack mergers after both blocks).
Qwen2.5-VL stays the default everywhere.

The same seed on the same library versions gives byte-identical files (a test checks this).
The model is random: it writes garbage, which the env treats as think steps or invalid calls.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from videoseek.agents.families import FAMILIES, QWEN2_5_VL, QWEN3_VL, ModelFamily

BUILD_VERSION = 1
MANIFEST = "videoseek_tiny_model.json"
# Qwen2.5-VL's added tokens in Qwen's id order; the first group is special (never plain text).
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)  # fmt: skip
QWEN_ADDED_TOKENS = (
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
)  # fmt: skip

_OBJECTS = ("ball", "car", "person", "dog", "cat", "door", "light", "sign", "bird", "cup", "box", "bicycle", "train", "flag", "square", "circle", "stripe", "arrow")
_COLOURS = ("red", "green", "blue", "yellow", "white", "black", "orange", "purple")
_EVENTS = ("moves left", "moves right", "appears", "disappears", "turns on", "flashes", "stops", "opens", "closes", "jumps", "falls", "speeds up", "slows down", "changes colour")
_QUESTIONS = (
    "What colour is the {obj} when it {event}?",
    "When does the {obj} {event}?",
    "How many times does the {obj} {event}?",
    "Which direction does the {obj} move after {t}s?",
    "What happens right after the {obj} {event}?",
    "Is the {obj} visible at the end of the video?",
)
_THOUGHTS = (
    "At {t}s the {obj} is {colour}.",
    "The frames at {t}s and {t2}s do not show the {obj}, so I should look closer between {a}s and {b}s.",
    "I see the {colour} {obj} {event} at {t}s, so the answer is {letter}.",
    "The sparse frames are not enough to tell when the {obj} {event}.",
    "In the crop, the {obj} {event} between {a}s and {b}s.",
)


def _time(rng: random.Random, limit: float = 120.0) -> str:
    return f"{rng.uniform(0, limit):.1f}"


def _corpus_line(rng: random.Random) -> str:
    """One random piece of protocol text: a question, a thought, a call, a tool response or an answer."""
    a = float(_time(rng, 100))
    b = round(a + rng.uniform(0.5, 20), 1)
    fields = {
        "obj": rng.choice(_OBJECTS), "colour": rng.choice(_COLOURS), "event": rng.choice(_EVENTS),
        "t": _time(rng), "t2": _time(rng), "a": a, "b": b, "letter": rng.choice("ABCD"),
    }  # fmt: skip
    kind = rng.randrange(6)
    if kind == 0:
        options = "\n".join(f"{letter}. {rng.choice(_COLOURS)}" for letter in "ABCD")
        question = rng.choice(_QUESTIONS).format(**fields)
        return f"Video duration: {b:.1f} seconds.\nQuestion: {question}\nOptions:\n{options}"
    if kind == 1:
        return "<think>" + rng.choice(_THOUGHTS).format(**fields) + "</think>"
    if kind == 2:
        call = json.dumps({"name": "crop_video", "arguments": {"start": a, "end": b}})
        return f"<tool_call>\n{call}\n</tool_call>" if rng.random() < 0.5 else f"<tool_call>{call}</tool_call>"
    if kind == 3:
        n = rng.randint(2, 8)
        times = ", ".join(f"{a + (b - a) * i / (n - 1):.1f}s" for i in range(n))
        return f"crop_video returned {n} frames from {a:.1f}s to {b:.1f}s at {times}."
    if kind == 4:
        return "<answer>" + rng.choice((fields["letter"], str(rng.randint(0, 20)), f"[{a}, {b}]")) + "</answer>"
    return rng.choice(_THOUGHTS).format(**fields)


def training_corpus(seed: int, lines: int = 4000) -> list[str]:
    """Seeded protocol text for the tokenizer, plus the system prompt, tool schema and chat template's fixed text.

    The text is that of the default tools, frozen: a different corpus gives a different vocabulary,
    and every tiny model and run recorded with one would change. Other tools' text tokenises too
    (byte-level BPE), in more pieces.
    """
    from videoseek.agents.prompting import VIDEOSEEK_BASE_CHAT_TEMPLATE
    from videoseek.envs.tools import DEFAULT_TOOLS, system_prompt, tool_schemas

    rng = random.Random(seed)
    fixed = [system_prompt(DEFAULT_TOOLS), json.dumps(tool_schemas(DEFAULT_TOOLS)[0]), VIDEOSEEK_BASE_CHAT_TEMPLATE]
    return fixed * 20 + [_corpus_line(rng) for _ in range(lines)]


def build_tokenizer(seed: int = 0, vocab_size: int = 2000):
    """A Qwen2Tokenizer whose byte-level BPE is trained on `training_corpus(seed)`."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    bpe = Tokenizer(models.BPE())
    # The same pipeline Qwen2Tokenizer wraps around its vocabulary.
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(training_corpus(seed), trainer)
    model = json.loads(bpe.to_str())["model"]
    vocab = dict(model["vocab"])
    for token in QWEN_SPECIAL_TOKENS + QWEN_ADDED_TOKENS:
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=[tuple(m) for m in model["merges"]],
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=list(QWEN_SPECIAL_TOKENS),
        model_max_length=32768,
    )
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS], special_tokens=True)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_ADDED_TOKENS])
    return tokenizer


# ---- per-family parts: processor, config ------------------------------------------------------
TEMPORAL_PATCH_SIZE = 2  # frames per temporal patch, both families


def _family(family: str) -> ModelFamily:
    """The `agents.families` entry for a family name; ValueError naming the known ones."""
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; expected one of: {', '.join(FAMILIES)}")
    return FAMILIES[family]


def _special_ids(tokenizer) -> dict[str, int]:
    return {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}


def _text_config(tokenizer, rope_parameters: dict, **extra) -> dict:
    """The decoder both families share: 2 layers, hidden 128, 2 heads of 64, one KV head."""
    ids = _special_ids(tokenizer)
    return {
        "vocab_size": len(tokenizer),  # no padded rows: every id the model can sample decodes
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 32768,
        # mrope splits head_dim/2 = 32 rotary pairs over (time, height, width), as Qwen's [16, 24, 24] does for 64.
        "rope_parameters": {"rope_type": "default", "mrope_section": [8, 12, 12], **rope_parameters},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": True,
        **extra,
    }


def _vision_token_ids(tokenizer) -> dict[str, int]:
    ids = _special_ids(tokenizer)
    return {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
    }


def _qwen2_5_vl_processor(tokenizer, chat_template: str):
    """Qwen2.5-VL's processor; per-frame bounds of 4 to 16 merged 28 px tokens."""
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    patches = {"patch_size": QWEN2_5_VL.patch_size, "merge_size": QWEN2_5_VL.merge_size, "temporal_patch_size": TEMPORAL_PATCH_SIZE}
    side = QWEN2_5_VL.token_side
    bounds = {"min_pixels": side * side * 4, "max_pixels": side * side * 16}  # 56*56 and 28*28*16
    return Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**bounds, **patches),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(**bounds, **patches),
        chat_template=chat_template,
    )


def _qwen3_vl_processor(tokenizer, chat_template: str):
    """Qwen3-VL's processor: 16 px patches; images 4 to 16 merged 32 px tokens each.

    Qwen3VLVideoProcessor bounds the whole clip (frames rounded up to pairs x height x width),
    not each frame: from one frame at 4 tokens up to 16 frames at 16 tokens each.
    """
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    patches = {"patch_size": QWEN3_VL.patch_size, "merge_size": QWEN3_VL.merge_size, "temporal_patch_size": TEMPORAL_PATCH_SIZE}
    token = QWEN3_VL.token_side**2
    return Qwen3VLProcessor(
        # Qwen3-VL normalises images as its video processor does (mean = std = 0.5), unlike Qwen2's CLIP stats.
        image_processor=Qwen2VLImageProcessor(
            size={"shortest_edge": token * 4, "longest_edge": token * 16}, image_mean=[0.5] * 3, image_std=[0.5] * 3, **patches
        ),
        tokenizer=tokenizer,
        video_processor=Qwen3VLVideoProcessor(size={"shortest_edge": token * 4, "longest_edge": token * 16 * 16}, **patches),
        chat_template=chat_template,
    )


def _vision_config(family: ModelFamily, **extra) -> dict:
    """The vision tower both families share (2 blocks, hidden 128, 2 heads), the family's patches, plus `extra`."""
    return {
        "depth": 2,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_heads": 2,
        "out_hidden_size": 128,
        "patch_size": family.patch_size,
        "spatial_merge_size": family.merge_size,
        "temporal_patch_size": TEMPORAL_PATCH_SIZE,
        **extra,
    }


def _qwen2_5_vl_config(tokenizer):
    """Qwen2_5_VLConfig: the shared decoder, a 2-block windowed vision tower of 14 px patches."""
    from transformers import Qwen2_5_VLConfig

    return Qwen2_5_VLConfig(
        text_config=_text_config(tokenizer, {"rope_theta": 1000000.0}),
        vision_config=_vision_config(QWEN2_5_VL, fullatt_block_indexes=[1], window_size=112, tokens_per_second=2),
        **_vision_token_ids(tokenizer),
        tie_word_embeddings=True,
    )


def _qwen3_vl_config(tokenizer):
    """Qwen3VLConfig: the shared decoder with interleaved M-RoPE, a 2-block vision tower of 16 px
    patches whose blocks 0 and 1 feed deepstack mergers into the first two decoder layers."""
    from transformers import Qwen3VLConfig

    # transformers 5.10's Qwen3VLTextConfig reads `rope_parameters` (`rope_scaling` is only a
    # legacy alias) and always interleaves; `mrope_interleaved` is for vLLM, which checks it.
    rope = {"rope_theta": 5000000.0, "mrope_interleaved": True}
    return Qwen3VLConfig(
        text_config=_text_config(tokenizer, rope, head_dim=64, hidden_act="silu", attention_bias=False),
        # a 16x16 learned position grid, interpolated to each frame's size
        vision_config=_vision_config(QWEN3_VL, num_position_embeddings=256, deepstack_visual_indexes=[0, 1]),
        **_vision_token_ids(tokenizer),
        tie_word_embeddings=True,
    )


_PARTS = {
    QWEN2_5_VL.name: (_qwen2_5_vl_processor, _qwen2_5_vl_config),
    QWEN3_VL.name: (_qwen3_vl_processor, _qwen3_vl_config),
}
assert set(_PARTS) == set(FAMILIES), "every family in agents.families needs a tiny builder"


def build_processor(tokenizer, family: str = QWEN2_5_VL.name):
    """The family's processor around `tokenizer`, with small pixel bounds and `VIDEOSEEK_CHAT_TEMPLATE`."""
    from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE

    return _PARTS[_family(family).name][0](tokenizer, VIDEOSEEK_CHAT_TEMPLATE)


def build_config(tokenizer, family: str = QWEN2_5_VL.name):
    """The family's model config: 2 layers, hidden 128, 2 heads of 64, a 2-block vision tower."""
    return _PARTS[_family(family).name][1](tokenizer)


# ---- shared: build, stage, cache ---------------------------------------------------------------
def build_tiny_model(out_dir: str | Path, seed: int = 0, *, family: str = QWEN2_5_VL.name, overwrite: bool = False) -> Path:
    """Write a tiny random model of `family` (weights, config, generation config, processor) to `out_dir`.

    `family` is a name from `agents.families.FAMILIES` ("qwen2.5-vl", the default, or "qwen3-vl").
    The files are written to a temporary sibling and moved into place, so a reader never sees a
    half-built model. An existing non-empty `out_dir` is an error unless `overwrite`.
    """
    import torch
    import transformers
    from transformers import GenerationConfig

    spec = _family(family)
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (overwrite to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(seed)
    processor = build_processor(tokenizer, spec.name)
    config = build_config(tokenizer, spec.name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, spec.model_class)(config).eval()
    end_ids = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    model.generation_config = GenerationConfig(eos_token_id=end_ids, pad_token_id=end_ids[1], bos_token_id=end_ids[1])
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(staging)
        processor.save_pretrained(staging)
        manifest = {"builder": __name__, "build_version": BUILD_VERSION, "seed": seed, "family": spec.name}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return out


def default_cache_dir() -> Path:
    """`$VIDEOSEEK_CACHE_DIR`, else `~/.cache/videoseek`."""
    return Path(os.environ.get("VIDEOSEEK_CACHE_DIR", Path.home() / ".cache" / "videoseek")).expanduser()


def cache_name(seed: int = 0, family: str = QWEN2_5_VL.name) -> str:
    """The cache folder of a tiny model: `tiny-qwen2_5-vl-seed0-v1` (unchanged), `tiny-qwen3-vl-seed0-v1`."""
    slug = _family(family).name.replace(".", "_")
    return f"tiny-{slug}-seed{seed}-v{BUILD_VERSION}"


def ensure_tiny_model(cache_dir: str | Path | None = None, seed: int = 0, family: str = QWEN2_5_VL.name) -> Path:
    """The cached tiny model of `family` for `seed` (built on first use): the embedded default checkpoint."""
    path = Path(cache_dir or default_cache_dir()) / cache_name(seed, family)
    if (path / MANIFEST).exists():
        return path
    try:
        return build_tiny_model(path, seed=seed, family=family, overwrite=True)
    except OSError:
        if (path / MANIFEST).exists():  # another process finished the same build first
            return path
        raise


# ---- CLI: videoseek tiny-model -----------------------------------------------------------------
_DISPLAY = {QWEN2_5_VL.name: "Qwen2.5-VL", QWEN3_VL.name: "Qwen3-VL"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="directory to write the model to")
    parser.add_argument("--seed", type=int, default=0, help="seed for the tokenizer corpus and the weights (default 0)")
    parser.add_argument(
        "--family", choices=list(FAMILIES), default=QWEN2_5_VL.name, help=f"model family to build (default {QWEN2_5_VL.name})"
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out directory")


def run(args: argparse.Namespace) -> int:
    from videoseek.envs.errors import UserError

    family = getattr(args, "family", QWEN2_5_VL.name)
    try:
        path = build_tiny_model(args.out, seed=args.seed, family=family, overwrite=args.force)
    except FileExistsError as exc:
        raise UserError(f"{exc}; pass --force to replace it") from None
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    print(f"tiny {_DISPLAY.get(family, family)} ({family}, seed {args.seed}) written to {path} ({size / 1e6:.1f} MB)")
    return 0
