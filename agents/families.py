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

The env resizes every frame to `EnvConfig.max_pixels` itself, for either family; the processor's
bounds (and a renderer's `min_pixels` / `max_pixels`) then only round to the token grid, but mean
per frame for Qwen2.5-VL and per clip for Qwen3-VL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
