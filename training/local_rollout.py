"""Group rollouts for the local GRPO backend: the rollout runner's episodes, as token sequences.

`videoseek.agents.rollout.run_rollouts` plays the groups (origin and the preset's perturbed
groups), scores them with `score_group` and writes trajectories for the viewer. Training also
needs each episode's conversation with the exact token ids the policy sampled; the runner keeps
those in the episode's message list (assistant turns carry `token_ids`), which it passes to the
policy every turn. `RecordingPolicy` keeps a reference to that list, so after the run the whole
conversation - frames included - is at hand without replaying the env.

`tokenize_episode` renders a conversation with the policy's own `ConversationRenderer` (so the
tokens are those the policy generated from) and marks the loss on the tokens the policy
generated: each assistant turn's sampled ids, including `<|im_end|>` only when the model wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from videoseek.agents.policy import Message, Policy, PolicyInput, PolicyOutput
from videoseek.envs.trajectory import Trajectory
from videoseek.training.local_grpo import TokenizedEpisode

MODEL_INPUT_KEYS = ("mm_token_type_ids", "pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")


class RecordingPolicy:
    """A policy wrapper that remembers each episode's live conversation (by episode id)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.conversations: dict[str, list[Message]] = {}

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        for item in batch:
            self.conversations[item.episode_id] = item.messages  # the runner appends to this very list
        return self.policy.act(batch)


def loss_mask_of(rendered: dict[str, Any], messages: Sequence[Message], end_of_turn_id: int, train_turn_end: bool = False) -> torch.Tensor:
    """(L,) mask: 1 on every assistant turn's sampled tokens; a closing `<|im_end|>` the template
    added (the turn stopped at a stop string or the token limit) stays 0 unless `train_turn_end`
    (SFT: the model learns to close its turns)."""
    mask = torch.zeros(rendered["input_ids"].shape[1], dtype=torch.long)
    assistants = [m for m in messages if m.role == "assistant"]
    for (start, end), message in zip(rendered["assistant_spans"], assistants):
        sampled = getattr(message, "token_ids", None)
        template_closed = end > start and int(rendered["input_ids"][0, end - 1]) == end_of_turn_id
        if template_closed and not train_turn_end and not (sampled and sampled[-1] == end_of_turn_id):
            end -= 1
        mask[start:end] = 1
    return mask


def tokenize_episode(renderer: Any, messages: Sequence[Message], train_turn_end: bool = False) -> TokenizedEpisode:
    """One conversation as a `TokenizedEpisode` (token ids, loss mask, vision inputs)."""
    rendered = renderer.render(list(messages), add_generation_prompt=False)
    model_inputs = {k: rendered[k] for k in MODEL_INPUT_KEYS if k in rendered}
    return TokenizedEpisode(
        input_ids=rendered["input_ids"][0],
        loss_mask=loss_mask_of(rendered, messages, renderer.end_of_turn_id, train_turn_end),
        model_inputs=model_inputs,
    )


@dataclass
class TrainingBatch:
    """The origin episodes of one step that training uses, with their rewards and groups."""

    trajectories: list[Trajectory]
    episodes: list[TokenizedEpisode]
    rewards: list[float]
    group_ids: list[str]


def training_batch(trajectories: Sequence[Trajectory], recorder: RecordingPolicy, renderer: Any) -> TrainingBatch:
    """Origin episodes that ran (no failure) with a recorded conversation; perturbed ones only shaped rewards."""
    kept = [t for t in trajectories if t.group.role == "origin" and not t.failure and t.episode_id in recorder.conversations]
    return TrainingBatch(
        trajectories=kept,
        episodes=[tokenize_episode(renderer, recorder.conversations[t.episode_id]) for t in kept],
        rewards=[float(t.reward) for t in kept],
        group_ids=[t.group.id for t in kept],
    )


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Means over origin episodes: reward, each reward component, accuracy, coverage, calls, turns."""
    origin = [t for t in trajectories if t.group.role == "origin"]
    if not origin:
        return {}
    out = {
        "reward": float(np.mean([t.reward for t in origin])),
        "accuracy": float(np.mean([t.accuracy or 0.0 for t in origin])),
        "coverage": float(np.mean([float(t.metrics.get("coverage", 0.0)) for t in origin])),
        "calls": float(np.mean([len(t.calls) for t in origin])),
        "turns": float(np.mean([len(t.turns) for t in origin])),
        "failures": float(sum(1 for t in origin if t.failure)),
    }
    names = sorted({k for t in origin for k in t.reward_components})
    for name in names:
        out[f"reward/{name}"] = float(np.mean([t.reward_components.get(name, 0.0) for t in origin]))
    return out
