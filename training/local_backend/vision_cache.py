"""Reuse of the frozen vision tower's output between the reference and policy forwards of one update.

In the local GRPO update (`grpo.grpo_update`) each episode is read twice with the same frames:
by the frozen reference (log-probs for the KL term) and by the policy (the loss). With
`actor.freeze_vision_tower` the tower's blocks are frozen in the policy (`sft.freeze_vision_encoder`:
every parameter but the mergers) and the reference is a copy of the starting policy, so both
models' blocks hold the same weights and, given the same pixels, compute the same hidden states.
`shared_vision(policy, reference)` computes them once: while the reference reads an episode its
blocks' outputs are kept, and the policy's blocks return them instead of recomputing.

What is reused is exact: the same blocks, on the same input, in the same call (one episode's
videos, as one `visual(pixel_values_videos, grid_thw)` call, in both forwards), under eval mode
(no dropout), so the result equals recomputing bit for bit (tests/training/test_vision_reuse.py).
The mergers (Qwen2.5-VL's `merger`, Qwen3-VL's `merger` and `deepstack_merger_list`) train, so
each model runs its own on the shared hidden states. Only the outputs that are read later are
kept: the last block's and, for Qwen3-VL, those of its deepstack layers; the other blocks of the
replaying forward return their input untouched (nobody reads it).

The vision outputs are keyed by the episode the caller says is being read (`shared.episode`,
set by `grpo.batch_logprobs` before each forward), the pixel tensor's shape and the grid; a
forward of an episode the reference has not read computes them afresh. The cache lives for one `with` block (one update).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def vision_tower(model: torch.nn.Module) -> torch.nn.Module:
    """The Qwen-VL vision tower of a `...ForConditionalGeneration` model (`model.model.visual`)."""
    inner = getattr(model, "model", model)
    visual = getattr(inner, "visual", None)
    if visual is None or not hasattr(visual, "blocks"):
        raise ValueError(f"{type(model).__name__} has no Qwen-VL vision tower (model.visual.blocks)")
    return visual


def blocks_frozen(model: torch.nn.Module) -> bool:
    """True when no parameter of the tower's blocks (or patch embedding) trains."""
    visual = vision_tower(model)
    return not any(p.requires_grad for name, p in visual.named_parameters() if "merger" not in name)


def _read_layers(visual: torch.nn.Module) -> set[int]:
    """Block indices whose output the tower reads after the loop: the last, and Qwen3-VL's deepstack layers."""
    return {len(visual.blocks) - 1, *map(int, getattr(visual, "deepstack_visual_indexes", []) or [])}


def _key(episode: Any, pixels: torch.Tensor, grid: Any) -> tuple:
    grid_key = tuple(map(int, grid.flatten().tolist())) if isinstance(grid, torch.Tensor) else grid
    return (episode, tuple(pixels.shape), str(pixels.dtype), grid_key)


class _SharedBlocks:
    """Patches the blocks of a recording tower and a replaying tower (restored by `close`)."""

    def __init__(self, recorder: torch.nn.Module, replayer: torch.nn.Module) -> None:
        self.outputs: dict[tuple, dict[int, torch.Tensor]] = {}
        self.current: dict[str, tuple | None] = {"record": None, "replay": None}
        self.restore: list[tuple[torch.nn.Module, str, Any]] = []
        self.hits = 0
        self.misses = 0
        self.episode: Any = None  # which episode the models read now (set by the caller: `grpo.batch_logprobs`)
        read = _read_layers(recorder)
        if read != _read_layers(replayer) or len(recorder.blocks) != len(replayer.blocks):
            raise ValueError("the reference and policy vision towers differ in layout")
        self._wrap_tower(recorder, "record")
        self._wrap_tower(replayer, "replay")
        for k, (rec_block, rep_block) in enumerate(zip(recorder.blocks, replayer.blocks)):
            self._wrap_block(rec_block, k, "record", k in read)
            self._wrap_block(rep_block, k, "replay", k in read)

    def _patch(self, module: torch.nn.Module, fn: Any) -> None:
        self.restore.append((module, "forward", module.__dict__.get("forward")))
        module.forward = fn

    def _wrap_tower(self, visual: torch.nn.Module, role: str) -> None:
        original = visual.forward

        def forward(hidden_states: torch.Tensor, grid_thw: Any = None, **kwargs: Any) -> Any:
            key = _key(self.episode, hidden_states, grid_thw)
            replay = role == "replay" and key in self.outputs
            self.current[role] = key if (role == "record" or replay) else None
            if role == "replay":
                self.hits += int(replay)
                self.misses += int(not replay)
            try:
                return original(hidden_states, grid_thw=grid_thw, **kwargs)
            finally:
                self.current[role] = None

        self._patch(visual, forward)

    def _wrap_block(self, block: torch.nn.Module, k: int, role: str, read: bool) -> None:
        original = block.forward

        def forward(hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            key = self.current[role]
            if role == "replay" and key is not None:
                return self.outputs[key][k] if read else hidden_states
            out = original(hidden_states, *args, **kwargs)
            if role == "record" and key is not None and read:
                self.outputs.setdefault(key, {})[k] = out.detach()
            return out

        self._patch(block, forward)

    def close(self) -> None:
        for module, name, previous in reversed(self.restore):
            if previous is None:
                module.__dict__.pop(name, None)
            else:
                setattr(module, name, previous)
        self.outputs.clear()


@contextlib.contextmanager
def shared_vision(policy: torch.nn.Module, reference: torch.nn.Module) -> Iterator[_SharedBlocks]:
    """Within the block, the policy's tower reuses the block outputs the reference's computed on the same pixels.

    The reference must read an episode first (as `grpo_update` does: all reference forwards, then
    the policy's). Refused (ValueError) when the policy's tower blocks train: then they differ.
    """
    if not blocks_frozen(policy):
        raise ValueError("vision reuse needs a frozen vision tower (actor.freeze_vision_tower)")
    shared = _SharedBlocks(vision_tower(reference), vision_tower(policy))
    try:
        yield shared
    finally:
        shared.close()
