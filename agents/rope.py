"""Qwen2.5-VL's M-RoPE position ids by the model's own rule: the one vLLM samples with.

Each token gets three position ids (time, height, width). Text advances all three by one; a
video's tokens sit on its (t, h, w) grid with the time index spaced by the clip's real rate:
`int(t * second_per_grid_ts * tokens_per_second)`; the text after an image or video resumes at the
largest position used so far plus one. That is Qwen's original Qwen2.5-VL code and vLLM's
(`Qwen2_5_VLForConditionalGeneration.get_mrope_input_positions`, vllm/model_executor/models/qwen2_5_vl.py).

Written here rather than taken from transformers because transformers 5.3-5.10 (5.10 is the
newest verl 0.9.1 allows) computes something else in `Qwen2_5_VLModel.get_rope_index`:
- the text after a video resumes at the video's start plus max(h, w) / merge, ignoring how far
  its time positions reach (huggingface/transformers#45381), so every token after a tool-returned
  clip gets other positions than vLLM gave it when sampling, sometimes ones the clip already holds;
- `second_per_grid_ts` is cast to int before scaling (fixed upstream by #48669), so frames sampled
  faster than 2 fps share one time position.
Training (verl stores the positions the processor's rope index gives), the HF forward of the local
backend and vLLM's sampling must agree; `use_sampling_rope_index` makes them agree on this rule.
Qwen3-VL is untouched: its videos are one-frame-pair segments with `<t seconds>` text, where both
rules coincide.
"""

from __future__ import annotations

import itertools
import types
from typing import Any


def qwen2_5_vl_rope_index(
    self: Any,
    input_ids: Any,
    mm_token_type_ids: Any = None,
    image_grid_thw: Any = None,
    video_grid_thw: Any = None,
    second_per_grid_ts: Any = None,
    attention_mask: Any = None,
    **unused: Any,
) -> tuple[Any, Any]:
    """Drop-in for `Qwen2_5_VLModel.get_rope_index` (same arguments and returns) with the sampling rule.

    `self` is anything with `config.vision_config.{spatial_merge_size, tokens_per_second}` (the
    model, or a processor verl gave the model config). Returns `(position_ids (3, B, L),
    mrope_position_deltas (B, 1))`; padding (attention_mask 0) keeps position 1, as in transformers.
    """
    import torch

    vision = self.config.vision_config
    merge = int(vision.spatial_merge_size)
    tokens_per_second = float(getattr(vision, "tokens_per_second", 1.0))
    if mm_token_type_ids is None:  # older callers: derive the token types from the ids
        config = self.config
        mm_token_type_ids = (input_ids == config.image_token_id).long() + 2 * (input_ids == config.video_token_id).long()
    grids = {1: iter(image_grid_thw.tolist() if image_grid_thw is not None else []), 2: iter(video_grid_thw.tolist() if video_grid_thw is not None else [])}
    seconds = iter(second_per_grid_ts.tolist() if second_per_grid_ts is not None else [])
    position_ids = torch.ones(3, *input_ids.shape, dtype=torch.long, device=input_ids.device)
    deltas = []
    for row in range(input_ids.shape[0]):
        valid = attention_mask[row].bool() if attention_mask is not None else torch.ones_like(input_ids[row], dtype=torch.bool)
        types_ = mm_token_type_ids[row][valid].tolist()
        parts, next_pos = [], 0
        for kind, run in itertools.groupby(types_):
            length = len(list(run))
            if kind == 0:
                parts.append(torch.arange(length).expand(3, -1) + next_pos)
            else:
                t, h, w = next(grids[kind])
                h, w = h // merge, w // merge
                step = float(next(seconds, 1.0)) * tokens_per_second if kind == 2 else 1.0
                if t * h * w != length:
                    raise ValueError(f"a vision run of {length} tokens does not match its grid {t}x{h}x{w}")
                time = (torch.arange(t, dtype=torch.float64) * step).long()
                grid = torch.stack(torch.meshgrid(time, torch.arange(h), torch.arange(w), indexing="ij")).reshape(3, -1)
                parts.append(grid + next_pos)
            next_pos = int(parts[-1].max()) + 1
        positions = torch.cat(parts, dim=1) if parts else torch.zeros(3, 0, dtype=torch.long)
        position_ids[:, row, valid] = positions.to(position_ids.device)
        deltas.append(next_pos - len(types_))
    return position_ids, torch.tensor(deltas, device=input_ids.device).unsqueeze(1)


def use_sampling_rope_index(obj: Any) -> bool:
    """Make `obj.get_rope_index` compute Qwen2.5-VL positions by the sampling rule (this module's docstring).

    `obj` is a loaded Qwen2.5-VL model (its inner `Qwen2_5_VLModel` gets the method), or a
    processor verl gave a `config` and a bound `get_rope_index`. Other families are left alone.
    Returns True when the rule was installed.
    """
    from videoseek.agents.families import family_of

    target = getattr(obj, "model", None) if hasattr(getattr(obj, "model", None), "get_rope_index") else obj
    family = family_of(getattr(target, "config", None))
    if family is None or not family.sampling_rope_index or not hasattr(target, "get_rope_index"):
        return False
    target.get_rope_index = types.MethodType(qwen2_5_vl_rope_index, target)
    return True
