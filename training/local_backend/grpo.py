"""One GRPO update in one process, built from verl's own algorithm functions (`--backend local`).

The math is verl's, called on CPU or one GPU without Ray:
- advantages: `core_algos.compute_grpo_outcome_advantage` through the registered `videoseek_grpo`
  estimator (origin group normalisation, VideoMend §5.5; rows without policy tokens left out);
- policy loss: `core_algos.get_policy_loss_fn("vanilla")`, PPO's clipped surrogate with dual clip
  (Schulman et al. 2017), configured by verl's `ActorConfig` (clip ratios, `loss_agg_mode`);
- KL to the frozen reference: `core_algos.kl_penalty` (`kl_loss_type`, default `low_var_kl`, the
  k3 estimator) aggregated by `core_algos.agg_loss`, weighted by `kl_loss_coef`, as verl's actor
  adds it when `use_kl_loss` is on;
- token log-probabilities: `verl.utils.torch_functional.logprobs_from_logits`.

What is ours: turning an episode into one token sequence with a loss mask (done by the caller),
per-episode forward passes (one sequence at a time, so Qwen2.5-VL's M-RoPE positions and its
video features need no padding logic), and the optimizer step with gradient clipping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import (
    agg_loss,
    get_adv_estimator_fn,
    get_policy_loss_fn,
    kl_penalty,
)
from verl.utils.torch_functional import logprobs_from_logits
from videoseek.training.verl_plugin.estimators import ESTIMATOR_NAME, TURN_ESTIMATOR_NAME, place_turn_rewards, turn_runs


@dataclass
class TokenizedEpisode:
    """One episode as the model reads it: the whole conversation and which tokens the policy wrote."""

    input_ids: torch.Tensor  # (L,) int64
    loss_mask: torch.Tensor  # (L,) 1 on tokens the policy generated, 0 on prompt / tool / frames
    model_inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # pixel_values_videos, video_grid_thw, ...

    def __post_init__(self) -> None:
        if self.input_ids.shape != self.loss_mask.shape or self.input_ids.dim() != 1:
            raise ValueError(f"input_ids {tuple(self.input_ids.shape)} and loss_mask {tuple(self.loss_mask.shape)} must be equal 1-D shapes")


@dataclass
class UpdateStats:
    loss: float
    pg_loss: float
    kl: float
    grad_norm: float
    pg_clipfrac: float
    ppo_kl: float
    policy_tokens: int
    advantages: list[float]
    entropy: float = 0.0  # mean entropy of the policy on its own tokens (nats)
    # With `record_tokens`: per episode, over its policy tokens in order, the log-probs the update
    # started from (on-policy: those the tokens were sampled with), the reference's, the entropy.
    token_logprobs: list[list[float]] = field(default_factory=list)
    ref_token_logprobs: list[list[float]] = field(default_factory=list)
    token_entropy: list[list[float]] = field(default_factory=list)
    turn_advantages: list[list[float]] = field(default_factory=list)  # per episode, the advantage of each turn (its first token)


def token_logprobs(model: torch.nn.Module, episode: TokenizedEpisode, device: torch.device | str) -> torch.Tensor:
    """log p(x_t | x_<t) for t = 1..L-1 under `model` (shape (L-1,)); differentiable."""
    ids = episode.input_ids.to(device).unsqueeze(0)
    extra = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in episode.model_inputs.items()}
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False, **extra)
    logits = out.logits[0, :-1].float()
    return logprobs_from_logits(logits, ids[0, 1:])


def masked_token_logprobs(model: torch.nn.Module, episode: TokenizedEpisode, device: torch.device | str,
                          with_entropy: bool = False, temperature: float = 1.0) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """log p(x_t | x_<t) of the loss-masked tokens only, in order (shape (mask.sum(),)); differentiable.

    The output head runs on those positions alone (`logits_to_keep` as indices), which on a small
    model is most of the cost of a full-sequence `token_logprobs`. `temperature` divides the
    logits first, as verl's actor does with the rollout temperature, so the log-probs are those
    of the distribution the tokens were sampled from. `with_entropy` also returns that
    distribution's entropy at each of those positions (detached).
    """
    ids = episode.input_ids.to(device).unsqueeze(0)
    targets = torch.nonzero(episode.loss_mask[1:]).flatten().to(device)  # position t predicts token t+1
    extra = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in episode.model_inputs.items()}
    out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False, logits_to_keep=targets, **extra)
    logp = torch.log_softmax(out.logits[0].float() / temperature, dim=-1)
    picked = logp.gather(1, ids[0, targets + 1].unsqueeze(1)).squeeze(1)
    if not with_entropy:
        return picked
    return picked, -(logp.exp() * logp).sum(-1).detach()


def pad_rows(rows: Sequence[torch.Tensor], value: float = 0.0) -> torch.Tensor:
    """Right-pad 1-D tensors into a (len(rows), max_len) matrix."""
    width = max(int(r.numel()) for r in rows)
    out = torch.full((len(rows), width), value, dtype=rows[0].dtype, device=rows[0].device)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out


def response_mask_of(episodes: Sequence[TokenizedEpisode]) -> torch.Tensor:
    """(B, max_len-1) mask aligned with `token_logprobs` (position t predicts token t+1)."""
    return pad_rows([e.loss_mask[1:].to(torch.float32) for e in episodes])


def outcome_rewards(rewards: Sequence[float], mask: torch.Tensor) -> torch.Tensor:
    """Token-level rewards with each episode's reward on its last policy token, as verl places them."""
    scores = torch.zeros_like(mask, dtype=torch.float32)
    for i, r in enumerate(rewards):
        positions = torch.nonzero(mask[i] > 0).flatten()
        if positions.numel():
            scores[i, positions[-1]] = float(r)
    return scores


def grpo_advantages(rewards: Sequence[float], group_ids: Sequence[str], mask: torch.Tensor, norm_by_std: bool = True,
                    estimator: str = ESTIMATOR_NAME, turn_rewards: Sequence[Sequence[float]] | None = None,
                    turn_weight: float | None = None) -> torch.Tensor:  # fmt: skip
    """Per-token advantages from a registered estimator: `videoseek_grpo` (verl's GRPO arithmetic,
    trajectory level) or `videoseek_turn_grpo` (turn level: `turn_rewards` per episode and turn,
    placed on each turn's first token as verl's agent loop places them, `estimators.place_turn_rewards`)."""
    token_rewards = outcome_rewards(rewards, mask)
    config: dict[str, Any] = {"norm_adv_by_std_in_grpo": norm_by_std}
    if estimator == TURN_ESTIMATOR_NAME:
        if turn_rewards is None or len(turn_rewards) != len(rewards):
            raise ValueError(f"{TURN_ESTIMATOR_NAME} needs the turn rewards of every episode")
        for i, per_turn in enumerate(turn_rewards):
            place_turn_rewards(token_rewards[i], mask[i], per_turn)
        if turn_weight is not None:
            config["videoseek_turn_weight"] = float(turn_weight)
    adv, _ = get_adv_estimator_fn(estimator)(
        token_level_rewards=token_rewards,
        response_mask=mask,
        index=np.asarray(group_ids, dtype=object),
        config=config,
    )
    return adv


def batch_logprobs(model: torch.nn.Module, episodes: Sequence[TokenizedEpisode], device: torch.device | str,
                   with_entropy: bool = False, temperature: float = 1.0, shared: Any = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """(B, max_len-1) log-probabilities aligned with `response_mask_of`: computed on the policy's
    tokens only (`masked_token_logprobs`), 0 elsewhere (every loss multiplies by the mask).
    `shared`: a `vision_cache.shared_vision` state, told which episode each forward reads."""
    rows, entropies = [], []
    for k, e in enumerate(episodes):
        if shared is not None:
            shared.episode = k
        where = torch.nonzero(e.loss_mask[1:]).flatten().to(device)
        picked, entropy = masked_token_logprobs(model, e, device, with_entropy=True, temperature=temperature)
        for values, out in ((picked, rows), (entropy, entropies)):
            out.append(torch.zeros(e.input_ids.numel() - 1, device=device).index_put((where,), values))
    return (pad_rows(rows), pad_rows(entropies)) if with_entropy else pad_rows(rows)


def grpo_update(
    policy: torch.nn.Module,
    reference: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    episodes: Sequence[TokenizedEpisode],
    rewards: Sequence[float],
    group_ids: Sequence[str],
    actor_config: Any,
    device: torch.device | str = "cpu",
    norm_by_std: bool = True,
    temperature: float = 1.0,
    record_tokens: bool = False,
    estimator: str = ESTIMATOR_NAME,
    turn_rewards: Sequence[Sequence[float]] | None = None,
    turn_weight: float | None = None,
    no_loss: Sequence[bool] | None = None,
    vision_reuse: bool = False,
) -> UpdateStats:
    """One on-policy GRPO step over `episodes` (one mini-batch, one PPO epoch, as GRPO does).

    `actor_config` is verl's `ActorConfig` (from the composed hydra config): clip ratios,
    `loss_agg_mode`, `use_kl_loss`, `kl_loss_coef`, `kl_loss_type`, `grad_clip`. `temperature`
    is the rollout's sampling temperature (policy and reference log-probs use it, as in verl).
    `record_tokens` also returns each episode's per-token log-probs and entropies (for the
    viewer's token view); it reads the tensors the update computes anyway and changes nothing.
    `estimator` / `turn_rewards` / `turn_weight`: see `grpo_advantages`. `no_loss` (per episode):
    episodes that contribute no loss and no baseline, their mask zeroed before the estimator as a
    failed episode's is (over-turn masking, Mini-o3: an episode cut by the turn limit).
    `vision_reuse`: the reference and policy forwards share the frozen vision tower's output per
    episode (`vision_cache.shared_vision`; exact, the same call on the same input).
    """
    mask = response_mask_of(episodes).to(device)
    if no_loss is not None:
        mask = mask * torch.tensor([0.0 if skip else 1.0 for skip in no_loss], device=mask.device).unsqueeze(1)
    advantages = grpo_advantages(rewards, group_ids, mask.cpu(), norm_by_std, estimator, turn_rewards, turn_weight).to(device)
    if vision_reuse and reference is not None:
        from videoseek.training.local_backend.vision_cache import shared_vision

        with shared_vision(policy, reference) as shared:
            return _update(policy, reference, optimizer, episodes, mask, advantages, actor_config, device, temperature, record_tokens, shared)
    return _update(policy, reference, optimizer, episodes, mask, advantages, actor_config, device, temperature, record_tokens)


def _update(policy: torch.nn.Module, reference: torch.nn.Module | None, optimizer: torch.optim.Optimizer,
            episodes: Sequence[TokenizedEpisode], mask: torch.Tensor, advantages: torch.Tensor, actor_config: Any,
            device: torch.device | str, temperature: float, record_tokens: bool, shared: Any = None) -> UpdateStats:  # fmt: skip
    """The loss and optimizer step of `grpo_update`, given the mask and the per-token advantages."""
    policy.eval()  # dropout off: the log-probs are those the policy sampled with
    with torch.no_grad():
        ref_logprobs = batch_logprobs(reference, episodes, device, temperature=temperature, shared=shared) if reference is not None else None

    optimizer.zero_grad(set_to_none=True)
    new_logprobs, entropy = batch_logprobs(policy, episodes, device, with_entropy=True, temperature=temperature, shared=shared)
    # One on-policy update of the whole batch (GRPO: one mini-batch, one epoch): the "old" policy
    # is this very policy, so its log-probs are the new ones detached (verl recomputes them in a
    # separate pass, which gives the same numbers; the ratio starts at exactly 1).
    old_logprobs = new_logprobs.detach()
    policy_loss_fn = get_policy_loss_fn(actor_config.policy_loss.get("loss_mode", "vanilla"))
    pg_loss, pg_metrics = policy_loss_fn(
        old_log_prob=old_logprobs,
        log_prob=new_logprobs,
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode=actor_config.loss_agg_mode,
        config=actor_config,
    )
    kl_value = torch.zeros((), device=device)
    loss = pg_loss
    if ref_logprobs is not None:
        kld = kl_penalty(new_logprobs, ref_logprobs, actor_config.kl_loss_type)
        kl_value = agg_loss(kld, mask, actor_config.loss_agg_mode)
        if actor_config.use_kl_loss:
            loss = loss + actor_config.kl_loss_coef * kl_value
    loss.backward()
    grad_clip = float(getattr(actor_config, "grad_clip", 1.0) or 1.0)
    grad_norm = torch.nn.utils.clip_grad_norm_([p for p in policy.parameters() if p.requires_grad], grad_clip)
    optimizer.step()

    first_policy_token = mask.argmax(dim=1)
    per_token: dict[str, list[list[float]]] = {}
    if record_tokens:
        picked = lambda values: [values[i][mask[i] > 0].detach().float().cpu().tolist() for i in range(len(episodes))]  # noqa: E731
        per_token = {"token_logprobs": picked(old_logprobs), "token_entropy": picked(entropy)}
        if ref_logprobs is not None:
            per_token["ref_token_logprobs"] = picked(ref_logprobs)
    return UpdateStats(
        loss=float(loss.detach()),
        pg_loss=float(pg_loss.detach()),
        kl=float(kl_value.detach()),
        grad_norm=float(grad_norm),
        pg_clipfrac=float(pg_metrics.get("actor/pg_clipfrac", 0.0)),
        ppo_kl=float(pg_metrics.get("actor/ppo_kl", 0.0)),
        policy_tokens=int(mask.sum()),
        entropy=float(agg_loss(entropy, mask, "token-mean")),
        advantages=[float(advantages[i, first_policy_token[i]]) for i in range(len(episodes))],
        turn_advantages=[[float(advantages[i, start]) for start, _ in turn_runs(mask[i])] for i in range(len(episodes))],
        **per_token,
    )
