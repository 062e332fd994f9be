"""The built-in reward components, registered in scoring order (`rewards/registry.py` says what a
component declares; docs/rewards.md gives each family's equations and parameters).

Each class is the glue between a family's pure function (its own module) and an episode: which
parameters it takes, what it reads from the `EpisodeSummary` and the sample, what it needs from
the driver, and its gate. Order matters only where one reads another: accuracy comes first
(clue_seek's `paid_if_correct` and process_thinker read it); the order is also the order of each
episode's `reward_components` and of the parameter blocks in a dumped `RewardConfig`.

>>> from videoseek.rewards.registry import REWARD_COMPONENTS
>>> list(REWARD_COMPONENTS)
['accuracy', 'format', 'ref_delta_format', 'timestamp', 'clue_seek', 'grounding', 'process', 'delta_mask', 'temporal', 'consistency', 'process_thinker']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from .accuracy import accuracy_reward
from .clue_seek import ClueSeekParams, clue_seek_reward
from .delta_mask import delta_mask_reward, sfgrpo_bonus, tgrpo_bonus
from .format import format_reward, ref_delta_format_reward
from .grounding import grounding_reward
from .process import process_reward
from .process_thinker import parse_step_response, rollout_process_reward
from .registry import ComponentParams, EpisodeContext, GroupContext, RewardComponent, register_component, sample_field
from .tags import thinking_text
from .timestamps import timestamp_reward


@register_component
class Accuracy(RewardComponent):
    name = "accuracy"
    reported = True
    summary = "the answer's accuracy by problem type (option letter, number, WER, ROUGE, tIoU)"
    source = "Video-R1; MOSS-ChatV eq. 3"

    def score(self, ctx: EpisodeContext) -> float:
        return accuracy_reward(ctx.episode.prediction, ctx.sample, strict_decimal=ctx.config.strict_decimal)


@register_component
class Format(RewardComponent):
    name = "format"
    reported = True
    summary = "1 when the final turn is <think>…</think><answer>…</answer>"
    source = "Video-R1; MOSS-ChatV eq. 4"

    def score(self, ctx: EpisodeContext) -> float:
        return format_reward(ctx.episode.assistant_turns, require_content=ctx.config.format_require_content)


@register_component
class RefDeltaFormat(RewardComponent):
    name = "ref_delta_format"
    summary = "VideoMend's Ref-Delta format checks F1–F5, weighted"
    source = "VideoMend §6.3"

    def score(self, ctx: EpisodeContext) -> float:
        return float(ref_delta_format_reward(ctx.episode.assistant_turns))


@register_component
class Timestamp(RewardComponent):
    name = "timestamp"
    gated_by = "ref_delta_format"
    summary = "r_ts, the share of cited times that parse, run forward and lie within the video"
    source = "VideoMend §6.2"

    def score(self, ctx: EpisodeContext) -> float:
        return timestamp_reward("\n".join(ctx.episode.assistant_turns), ctx.episode.duration, ctx.config.timestamp_weights)


@register_component
class ClueSeek(RewardComponent):
    name = "clue_seek"
    Params = ClueSeekParams
    summary = "coverage less the footage outside the clues, credit for calls that gain evidence, penalties for extra, duplicate, fragmented and harmful calls"
    source = "Open-o3-Video-v2 (CS-GRPO)"

    def score(self, ctx: EpisodeContext) -> float:
        ep, params = ctx.episode, ctx.params
        value = float(
            clue_seek_reward(ep.calls, ctx.field("clue_intervals") or [], ep.duration, ep.invalid_calls,
                             params=params, zooms=ep.zooms, key_frames=ctx.field("key_frames") or [], call_frames=ep.call_frames)
        )  # fmt: skip
        # DeepEyes' conditional tool reward (off by default): a wrong answer keeps the costs, not the credit.
        return min(value, 0.0) if params.paid_if_correct and not ctx.correct else value


class GroundingParams(ComponentParams):
    sigma: float = Field(2.0, gt=0)
    time_gate: float = Field(2.0, ge=0)
    temporal_weight: float = 0.5
    spatial_weight: float = 0.5


@register_component
class Grounding(RewardComponent):
    name = "grounding"
    Params = GroundingParams
    summary = "timestamps of the thinking near key frames, boxes by IoU"
    source = "Open-o3-Video"

    def score(self, ctx: EpisodeContext) -> float:
        g = ctx.params
        return float(grounding_reward(thinking_text(ctx.episode.assistant_turns), ctx.field("key_frames") or [], g.sigma, g.time_gate, g.temporal_weight, g.spatial_weight))


class ProcessParams(ComponentParams):
    alpha: float = Field(1.0, gt=0)
    k_ref: int = Field(2, ge=1)
    k_target: int = Field(2, ge=1)
    method: Literal["regex", "pysbd"] = "regex"
    normalize: bool = False


@register_component
class Process(RewardComponent):
    name = "process"
    Params = ProcessParams
    summary = "exp(−α·D) of the subsequence-DTW distance between reasoning steps and the reference, ROUGE costs"
    source = "MOSS-ChatV eqs. 9–12 (PRR)"

    def score(self, ctx: EpisodeContext) -> float:
        reference, p = ctx.field("reference_reasoning"), ctx.params
        if not reference:
            return 0.0
        turns = ctx.episode.assistant_turns
        return float(process_reward(thinking_text(turns) or "\n".join(turns), reference, p.alpha, p.k_ref, p.k_target, p.method, p.normalize))


class DeltaMaskParams(ComponentParams):
    alpha: float = 0.3
    gamma: float = -0.2
    tau: float = 0.5
    # λ (eq. 2) is the preset's `timestamp` weight and the gate is `RewardConfig.format_gate`: one place each.


def oracle_label(sample: object, masked: Sequence[object], perturbation: Mapping | None) -> bool:
    """c of DM-GRPO: from the perturbation record, the masked episodes, or the sample's only pattern."""
    for source in (perturbation or {}, *(ep.metadata for ep in masked)):
        if "oracle_correct" in source:
            return bool(source["oracle_correct"])
        if source.get("pattern") is not None:
            return bool(sample_field(sample_field(sample, "mask_patterns")[int(source["pattern"])], "oracle_correct"))
    patterns = sample_field(sample, "mask_patterns", []) or []
    if len(patterns) == 1:
        return bool(sample_field(patterns[0], "oracle_correct"))
    raise ValueError("perturbation: DM-GRPO needs oracle_correct or the mask pattern index of the masked group")


@register_component
class DeltaMask(RewardComponent):
    name = "delta_mask"
    Params = DeltaMaskParams
    group_kind = "mask"
    gated_by = "ref_delta_format"
    summary = "r_dm ∈ {0, α, α+γ} from the masked group's accuracy p̃ and the oracle label c"
    source = "VideoMend eq. 1 (DM-GRPO)"

    def score_in_group(self, scored: Mapping[str, float], group: GroupContext) -> float:
        d = group.params
        oracle = oracle_label(group.sample, group.perturbed, group.perturbation)
        return delta_mask_reward(group.correct(scored), group.perturbed_accuracy, oracle, d.alpha, d.gamma, d.tau)


class TemporalParams(ComponentParams):
    alpha: float = 0.3
    mu: float = 0.8


@register_component
class Temporal(RewardComponent):
    name = "temporal"
    Params = TemporalParams
    group_kind = "shuffle"
    summary = "+α for correct answers when the origin accuracy p ≥ μ·p̃ of the frame-shuffled group"
    source = "Video-R1 T-GRPO"

    def score_in_group(self, scored: Mapping[str, float], group: GroupContext) -> float:
        t = group.params
        return tgrpo_bonus(group.correct(scored), group.origin_accuracy, group.perturbed_accuracy, t.alpha, t.mu)


class ConsistencyParams(ComponentParams):
    high: float = 0.3
    low: float = 0.1
    tau: float = 0.5


@register_component
class Consistency(RewardComponent):
    name = "consistency"
    Params = ConsistencyParams
    group_kind = "blend"
    summary = "a bonus for a correct answer, larger when the α-blended group is mostly right"
    source = "VideoMend §8.2 (SF-GRPO)"

    def score_in_group(self, scored: Mapping[str, float], group: GroupContext) -> float:
        c = group.params
        return sfgrpo_bonus(group.correct(scored), group.perturbed_accuracy, c.high, c.low, c.tau)


class ProcessThinkerParams(ComponentParams):
    num_continuations: int = Field(4, ge=1)
    k_min: int = Field(2, ge=0)
    k_max: int = Field(6, ge=1)
    alpha: float = 0.2
    beta: float = 0.0
    lambda_acc: float = 0.0
    lambda_proc: float = 1.0
    tau: float = 0.5


@register_component
class ProcessThinker(RewardComponent):
    name = "process_thinker"
    Params = ProcessThinkerParams
    needs_continuations = True
    summary = "format, bounded step bonus, penalty gate and the success rate of continuations from each step prefix"
    source = "ProcessThinker eq. 6"

    def score(self, ctx: EpisodeContext) -> float:
        """ProcessThinker eq. 6. Without sampled rates, each prefix's success is the episode's own
        outcome: the rollout itself is one continuation of every one of its prefixes (M = 1)."""
        p, turns, rates = ctx.params, ctx.episode.assistant_turns, ctx.success_rates
        if rates is None:
            _, steps = parse_step_response(turns)
            rates = [1.0 if ctx.correct else 0.0] * min(len(steps), p.k_max)
        return float(
            rollout_process_reward(
                turns, ctx.accuracy, success_rates=rates, num_continuations=p.num_continuations,
                k_min=p.k_min, k_max=p.k_max, alpha=p.alpha, beta=p.beta, lambda_acc=p.lambda_acc,
                lambda_proc=p.lambda_proc, tau=p.tau, correct_threshold=ctx.config.correct_threshold,
            )
        )  # fmt: skip

