"""M-RoPE position ids in verl equal those vLLM sampled with and those of the local HF forward.

verl's agent-loop worker computes each trajectory's position ids once, in
`AgentLoopWorker._compute_position_ids` (verl/experimental/agent_loop/agent_loop.py ~925), by
calling the model's `get_rope_index` bound to the processor with `image_grid_thw`,
`video_grid_thw` and `mm_token_type_ids`; the actor trains on exactly those ids. Anything else
the rope index needs reaches it only through verl's extension point: a processor attribute
`get_rope_index_kwargs(multi_modal_inputs) -> dict` (agent_loop.py ~948).

Two things go wrong for Qwen2.5-VL with stock verl 0.9.1 + transformers 5.10, each making
training score tokens at positions other than those vLLM sampled them at:

1. `second_per_grid_ts`, the seconds between temporal patches of each video (it spaces the time
   positions), is not passed: the rope index then assumes 1 s per patch for every clip.
2. transformers 5.10's `get_rope_index` itself differs from vLLM after a video (see
   `videoseek.agents.rope`).

`align_positions(processor)` fixes both on the processor verl uses: its `get_rope_index` becomes
`qwen2_5_vl_rope_index` (the rule vLLM samples with; `TransformersPolicy` gives its model the same
one) and its `get_rope_index_kwargs` passes `second_per_grid_ts`. Idempotent; Qwen3-VL (times as
`<t seconds>` text) needs neither. `VideoSeekAgentLoop` calls it on the worker's processor.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

# Inputs of a `get_rope_index` that verl's `_compute_position_ids` does not pass by itself.
EXTRA_ROPE_INPUTS = ("second_per_grid_ts",)


def rope_index_extra_inputs(processor: Any) -> tuple[str, ...]:
    """The extra inputs the processor's bound `get_rope_index` accepts (empty without one)."""
    rope_index = getattr(processor, "get_rope_index", None)
    if rope_index is None:
        return ()
    params = inspect.signature(rope_index).parameters
    return tuple(name for name in EXTRA_ROPE_INPUTS if name in params)


def align_positions(processor: Any) -> bool:
    """The sampling rule's rope index and verl's kwargs hook on `processor`; True if it needed the hook."""
    from videoseek.agents.rope import use_sampling_rope_index

    if getattr(processor, "get_rope_index", None) is not None:
        use_sampling_rope_index(processor)
    return install_rope_index_kwargs(processor)


def install_rope_index_kwargs(processor: Any) -> bool:
    """Give `processor` verl's `get_rope_index_kwargs` hook; True if the rope index needs it."""
    names = rope_index_extra_inputs(processor)
    if not names:
        return False
    if getattr(getattr(processor, "get_rope_index_kwargs", None), "videoseek_names", None) == names:
        return True

    def get_rope_index_kwargs(multi_modal_inputs: Mapping[str, Any]) -> dict[str, Any]:
        return {name: multi_modal_inputs[name] for name in names if multi_modal_inputs.get(name) is not None}

    get_rope_index_kwargs.videoseek_names = names  # type: ignore[attr-defined]
    processor.get_rope_index_kwargs = get_rope_index_kwargs
    return True
