"""Group-contrast rewards: DM-GRPO's delta-mask reward (VideoMend) and the T-GRPO / SF-GRPO baselines.

DM-GRPO (seed 002, §5.4, eqs. 1–2; §6.1): the policy answers the same question on the original
frames (origin group) and on frames whose pixels inside one Delta's time range are zeroed
(masked group, positions kept). With p̃ the masked group's accuracy and c the oracle label of
that mask pattern (1: the oracle still answers right without those frames, the frames are not
critical and the test is valid; 0: critical frames, the test says nothing):

    r_dm = 0            if the origin answer is wrong or c = 0
           α            if p̃ ≥ τ
           α + γ        if p̃ < τ                      (α = 0.3, γ = −0.2, τ = 0.5)
    R = r_acc + λ·r_ts + r_dm                        (λ = 0.2)

and r_ts, r_dm are zeroed when the Ref-Delta format reward is below 0.4 (§6.3, gate).

T-GRPO (Video-R1, the shuffle baseline of seed 002 §8.1): with p the ordered group's accuracy
and p̃ the shuffled group's, correct ordered answers get +α when p ≥ μ·p̃ (α = 0.3, μ = 0.8).
SF-GRPO (seed 002 §8.2, α-blend baseline): +0.3 for a correct origin answer when the blended
group is mostly right, +0.1 when it is mostly wrong, 0 for a wrong origin answer — the DM rule
with c = 1.

Correctness of one answer is accuracy ≥ `correct_threshold` (0.5: the same as "= 1" for the
binary problem types; free-form and regression answers count as right above half marks), and
p̃ is the mean accuracy of the perturbed group (the fraction correct for binary types).

>>> delta_mask_reward(True, 0.75, True), delta_mask_reward(True, 0.25, True), delta_mask_reward(True, 0.9, False)
(0.3, 0.09999999999999998, 0.0)
>>> round(dmgrpo_reward(accuracy=1.0, timestamp=0.5, delta_mask=0.3, format_score=0.9), 6)   # 1 + 0.2·0.5 + 0.3
1.4
>>> dmgrpo_reward(accuracy=1.0, timestamp=0.5, delta_mask=0.3, format_score=0.3)   # format gate
1.0
"""

from __future__ import annotations

from collections.abc import Sequence


def delta_mask_reward(
    origin_correct: bool,
    masked_accuracy: float,
    oracle_correct: bool,
    alpha: float = 0.3,
    gamma: float = -0.2,
    tau: float = 0.5,
) -> float:
    """VideoMend r_dm for one origin answer (seed 002 eq. 1)."""
    if not origin_correct or not oracle_correct:
        return 0.0
    return alpha if masked_accuracy >= tau else alpha + gamma


TIMESTAMP_WEIGHT = 0.2  # λ of eq. 2: the dmgrpo preset's timestamp weight (`rewards.compose.PRESETS`)
FORMAT_GATE = 0.4  # §6.3: r_ts and r_dm count only when the Ref-Delta format reward reaches it (`PRESET_GATES`)


def dmgrpo_reward(
    accuracy: float,
    timestamp: float,
    delta_mask: float,
    format_score: float,
    lam: float = TIMESTAMP_WEIGHT,
    format_gate: float = FORMAT_GATE,
) -> float:
    """DM-GRPO total R = r_acc + λ·r_ts + r_dm, with r_ts and r_dm zeroed below the format gate (eq. 2, §6.3)."""
    if format_score < format_gate:
        return accuracy
    return accuracy + lam * timestamp + delta_mask


def tgrpo_bonus(
    origin_correct: bool,
    ordered_accuracy: float,
    shuffled_accuracy: float,
    alpha: float = 0.3,
    mu: float = 0.8,
) -> float:
    """Video-R1 T-GRPO: +α for a correct answer when the ordered group beats μ × the shuffled group.

    >>> tgrpo_bonus(True, 0.75, 0.5), tgrpo_bonus(True, 0.25, 0.5), tgrpo_bonus(False, 1.0, 0.0)
    (0.3, 0.0, 0.0)
    """
    return alpha if origin_correct and ordered_accuracy >= mu * shuffled_accuracy else 0.0


def sfgrpo_bonus(origin_correct: bool, blended_accuracy: float, high: float = 0.3, low: float = 0.1, tau: float = 0.5) -> float:
    """SF-GRPO three-level consistency bonus (seed 002 §8.2): `high`, `low` or 0.

    >>> sfgrpo_bonus(True, 0.6), sfgrpo_bonus(True, 0.2), sfgrpo_bonus(False, 1.0)
    (0.3, 0.1, 0.0)
    """
    if not origin_correct:
        return 0.0
    return high if blended_accuracy >= tau else low


def group_accuracy(accuracies: Sequence[float]) -> float:
    """Mean accuracy of a group (the fraction correct for binary problem types); 0 for an empty group."""
    return sum(accuracies) / len(accuracies) if accuracies else 0.0
