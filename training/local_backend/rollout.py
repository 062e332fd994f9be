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

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from videoseek.agents.groups import turn_rewards_of
from videoseek.agents.policy import Message, Policy, PolicyInput, PolicyOutput
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards import group_stats
from videoseek.training.local_backend.grpo import TokenizedEpisode

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
    (SFT: the model learns to close its turns). A forced turn (the episode's start wrote it, not
    the policy: `agents.groups.look_on_start`) stays 0: it is context, as a tool answer is."""
    mask = torch.zeros(rendered["input_ids"].shape[1], dtype=torch.long)
    assistants = [m for m in messages if m.role == "assistant"]
    for (start, end), message in zip(rendered["assistant_spans"], assistants):
        if message.forced:
            continue
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
    turn_rewards: list[list[float]] = dataclasses.field(default_factory=list)  # per episode and turn (`agents.groups.turn_rewards_of`)
    truncated: list[bool] = dataclasses.field(default_factory=list)  # cut by a budget (over-turn masking leaves them out)


def training_batch(trajectories: Sequence[Trajectory], recorder: RecordingPolicy, renderer: Any,
                   groups: Sequence[str] | None = None, reward_config: Any = None) -> TrainingBatch:  # fmt: skip
    """Origin episodes that ran (no failure) with a recorded conversation, of `groups` only when
    given (dynamic sampling); perturbed episodes only shaped rewards. With `reward_config`, each
    episode's turn rewards too (turn-level credit)."""
    kept = [t for t in trajectories if t.group.role == "origin" and not t.failure and t.episode_id in recorder.conversations
            and (groups is None or t.group.id in groups)]  # fmt: skip
    return TrainingBatch(
        trajectories=kept,
        episodes=[tokenize_episode(renderer, recorder.conversations[t.episode_id]) for t in kept],
        rewards=[float(t.reward) for t in kept],
        group_ids=[t.group.id for t in kept],
        turn_rewards=[turn_rewards_of(t.turns, reward_config) for t in kept] if reward_config is not None else [],
        truncated=[bool(t.truncated) for t in kept],
    )


def varied_groups(trajectories: Sequence[Trajectory]) -> tuple[list[str], int]:
    """(ids of the origin groups whose episodes' rewards differ, in order; number of origin groups).

    A group whose rewards are all equal (or that has fewer than two episodes that ran) has zero
    advantage everywhere and gives no policy gradient: DAPO's dynamic sampling drops it.

    >>> from videoseek.envs.trajectory import Trajectory
    >>> def ep(group, reward):
    ...     return Trajectory(episode_id=f"{group}/{reward}", sample_id=group, policy="p", group={"id": group}, reward=reward)
    >>> varied_groups([ep("a", 1.0), ep("a", 1.0), ep("b", 0.0), ep("b", 2.0)])
    (['b'], 2)
    """
    rewards: dict[str, list[float]] = {}
    for t in trajectories:
        if t.group.role == "origin":
            rewards.setdefault(t.group.id, [])
            if not t.failure:
                rewards[t.group.id].append(float(t.reward))
    varied = [g for g, r in rewards.items() if group_stats(r)[1]]
    return varied, len(rewards)


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Means over origin episodes: reward, each reward component, accuracy, coverage; failures (a
    count). The tool-use numbers (calls, calls per tool, crop_rate, valid_format, turns, ...) are
    `collapse.tool_use_metrics`'s, defined in `videoseek.envs.metrics`."""
    origin = [t for t in trajectories if t.group.role == "origin"]
    if not origin:
        return {}
    out = {
        "reward": float(np.mean([t.reward for t in origin])),
        "accuracy": float(np.mean([t.accuracy or 0.0 for t in origin])),
        "coverage": float(np.mean([float(t.metrics.get("coverage", 0.0)) for t in origin])),
        "failures": float(sum(1 for t in origin if t.failure)),
    }
    names = sorted({k for t in origin for k in t.reward_components})
    for name in names:
        out[f"reward/{name}"] = float(np.mean([t.reward_components.get(name, 0.0) for t in origin]))
    return out


# ---- what a step trained on, for the viewer (RUN/rollouts/step_NNNN/grpo.json, tokens.jsonl) ----
VISION_PADS = ("<|video_pad|>", "<|image_pad|>")


def mask_segments(loss_mask: Sequence[int]) -> list[tuple[str, int, int]]:
    """(kind, start, stop) runs of a loss mask: `assistant` on the policy's tokens, `prompt` before
    the first of them, `tool` between two (tool answer plus chat-template tokens), `tail` after the last.

    >>> mask_segments([0, 0, 1, 1, 0, 1, 0])
    [('prompt', 0, 2), ('assistant', 2, 4), ('tool', 4, 5), ('assistant', 5, 6), ('tail', 6, 7)]
    """
    runs: list[tuple[int, int, int]] = []
    for k, m in enumerate(int(v) for v in loss_mask):
        if runs and runs[-1][0] == m:
            runs[-1] = (m, runs[-1][1], k + 1)
        else:
            runs.append((m, k, k + 1))
    ones = [i for i, r in enumerate(runs) if r[0] == 1]
    out = []
    for i, (m, start, stop) in enumerate(runs):
        if m == 1:
            kind = "assistant"
        elif not ones or i < ones[0]:
            kind = "prompt"
        elif i > ones[-1]:
            kind = "tail"
        else:
            kind = "tool"
        out.append((kind, start, stop))
    return out


def _group_stats(rewards: Sequence[float], group_ids: Sequence[str], has_tokens: Sequence[bool]) -> dict[str, dict[str, Any]]:
    """Per group: the rewards GRPO normalised (episodes with policy tokens), their mean and
    unbiased std (None for a group of one, whose advantage is 0), as `videoseek_grpo` computes them."""
    groups: dict[str, list[float]] = {}
    for r, g, ok in zip(rewards, group_ids, has_tokens):
        if ok:
            groups.setdefault(g, []).append(float(r))
    out = {}
    for g, values in groups.items():
        mean, std = group_stats(values)
        out[g] = {"id": g, "n": len(values), "rewards": values, "mean": mean, "std": std}
    return out


def _round(values: Sequence[float], digits: int = 4) -> list[float]:
    return [round(float(v), digits) for v in values]


def step_record(step: int, batch: TrainingBatch, stats: Any, tokenizer: Any, reward_config: dict[str, Any],
                norm_by_std: bool = True, record_tokens: bool = False,
                no_loss: Sequence[bool] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What one GRPO step trained on: (the `grpo.json` dict, the `tokens.jsonl` rows).

    `grpo.json`: the reward config, each group's rewards, mean and std, and per episode its group,
    reward, the advantage the update used (`stats.advantages`), token counts by mask segment.
    `tokens.jsonl` (only with `record_tokens`, and `stats` from `grpo_update(record_tokens=True)`):
    per episode its mask segments with their text, and on the policy's tokens each token's text,
    sampling log-prob, reference log-prob and entropy. `no_loss`: the episodes the update masked
    whole (over-turn masking), reported out of the baseline as `grpo_update` left them.
    """
    pads = {tokenizer.convert_tokens_to_ids(p): p for p in VISION_PADS}
    pads = {k: v for k, v in pads.items() if isinstance(k, int) and k != getattr(tokenizer, "unk_token_id", None)}
    skipped = list(no_loss) if no_loss is not None else [False] * len(batch.episodes)
    has_tokens = [bool(int(e.loss_mask.sum()) > 0) and not skip for e, skip in zip(batch.episodes, skipped)]
    groups = _group_stats(batch.rewards, batch.group_ids, has_tokens)
    advantages = list(getattr(stats, "advantages", None) or [None] * len(batch.episodes))
    episodes, token_rows = [], []
    for i, (traj, ep) in enumerate(zip(batch.trajectories, batch.episodes)):
        ids = ep.input_ids.tolist()
        segments = mask_segments(ep.loss_mask.tolist())
        counts = {"total": len(ids), "prompt": 0, "assistant": 0, "tool": 0, "tail": 0, "vision": sum(1 for t in ids if t in pads)}
        for kind, start, stop in segments:
            counts[kind] += stop - start
        g = groups.get(batch.group_ids[i], {})
        episodes.append({
            "episode_id": traj.episode_id, "sample_id": traj.sample_id, "group_id": batch.group_ids[i], "group_index": traj.group.index,
            "reward": float(batch.rewards[i]), "advantage": advantages[i], "in_baseline": has_tokens[i],
            "group_mean": g.get("mean"), "group_std": g.get("std"), "tokens": counts,
            "segments": [{"kind": kind, "n": stop - start} for kind, start, stop in segments],
        })  # fmt: skip
        turn_adv = getattr(stats, "turn_advantages", None) or []
        if batch.turn_rewards and i < len(turn_adv):  # turn-level credit: each turn's reward and advantage
            episodes[-1]["turn_rewards"] = batch.turn_rewards[i]
            episodes[-1]["turn_advantages"] = _round(turn_adv[i])
        if not record_tokens:
            continue
        per_token = {name: (getattr(stats, name, None) or [None] * len(batch.episodes))[i]
                     for name in ("token_logprobs", "ref_token_logprobs", "token_entropy")}  # fmt: skip
        taken = 0  # policy tokens passed so far: the index into the per-token lists
        rows = []
        for kind, start, stop in segments:
            seg: dict[str, Any] = {"kind": kind, "n": stop - start}
            part = ids[start:stop]
            if kind == "assistant":
                seg["pieces"] = tokenizer.batch_decode([[t] for t in part], skip_special_tokens=False, clean_up_tokenization_spaces=False)
                for name, key in (("token_logprobs", "logprobs"), ("ref_token_logprobs", "ref_logprobs"), ("token_entropy", "entropy")):
                    values = per_token[name]
                    if values is not None:
                        seg[key] = _round(values[taken : taken + len(part)])
                taken += len(part)
            else:
                seg["text"] = _collapsed_text(part, tokenizer, pads)
            rows.append(seg)
        token_rows.append({"episode_id": traj.episode_id, "segments": rows})
    record = {
        "step": step, "reward_config": reward_config, "norm_adv_by_std": bool(norm_by_std), "epsilon": 1e-6,
        "groups": list(groups.values()), "episodes": episodes,
    }  # fmt: skip
    return record, token_rows


def _collapsed_text(ids: Sequence[int], tokenizer: Any, pads: dict[int, str]) -> str:
    """The decoded text of `ids` with each run of vision pad tokens written once, as `<|video_pad|>×N`."""
    out, k = [], 0
    ids = list(ids)
    while k < len(ids):
        if ids[k] in pads:
            j = k
            while j < len(ids) and ids[j] == ids[k]:
                j += 1
            out.append(f"{pads[ids[k]]}×{j - k}")
            k = j
        else:
            j = k
            while j < len(ids) and ids[j] not in pads:
                j += 1
            out.append(tokenizer.decode(ids[k:j], skip_special_tokens=False, clean_up_tokenization_spaces=False))
            k = j
    return "".join(out)
