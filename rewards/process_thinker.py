"""ProcessThinker's rollout-based process reward (seed 004, §2.2, eqs. 1–6).

A response is step-tagged: `<think>…<step>s_1</step>…<step>s_K</step>…</think><answer>…</answer>`
(eq. 1). For each prefix p_i = (s_1, …, s_i), M continuations are sampled from the policy and
c_i is their success rate under the final-answer verifier (eq. 2). Then

    R_proc = (1 / min(K, K_max)) · Σ_{i ≤ min(K, K_max)} c_i                                (3)
    B(K)   = α · sqrt(clip((K − K_min) / (K_max − K_min), 0, 1))                            (4)
    R̄_acc  = 1 if R_acc = 1 else −B(K);   R̄_proc = R_proc if R_proc ≥ τ else −B(K)          (5)
    r      = (r_fmt + β) + λ_acc·R̄_acc + λ_proc·R̄_proc + B(K),  λ_acc + λ_proc = 1        (6)

for a format-valid response (tags correctly nested and K in [K_min, K_max]); r = 0 and no
continuation is sampled otherwise. Seed values: M = 4, K_max = 6, τ = 0.5. The seed does not
give α, β, K_min or the λ split; defaults: α = 0.2 (the step bonus stays below a fifth of the
accuracy term), β = 0 (no constant offset), K_min = 2 (one step is not a process), and
λ_acc = 0, λ_proc = 1, the "process-only" variant of the seed's main results (Table 1).

The function stays pure: it takes the success rates, or a `sampler(prefix_steps, m)` callable
that returns the m continuations' correctness (bools) or their success rate; the rollout code
drives the sampler with a model.

>>> resp = "<think><step>a</step><step>b</step><step>c</step><step>d</step></think><answer>B</answer>"
>>> round(rollout_process_reward(resp, accuracy=1.0, success_rates=[0.5, 0.75, 1.0, 1.0]), 4)
1.9539
>>> rollout_process_reward("<think>no steps</think><answer>B</answer>", accuracy=1.0, success_rates=[])
0.0
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from .format import format_reward
from .tags import tag_blocks

_TAG = re.compile(r"</?step>")

Sampler = Callable[[list[str], int], "Sequence[bool] | float"]


def parse_step_response(response: str | Sequence[str]) -> tuple[bool, list[str]]:
    """(tags correctly nested, steps) of a response or of an episode's assistant turns.

    Nested means: the final turn is `<think>…</think><answer>…</answer>` and inside the think
    blocks `<step>` and `</step>` alternate, starting with an opening tag and ending closed.

    >>> parse_step_response("<think><step>x</step> <step>y</step></think><answer>A</answer>")
    (True, ['x', 'y'])
    >>> parse_step_response("<think><step>x<step>y</step></think><answer>A</answer>")[0]
    False
    """
    turns = [response] if isinstance(response, str) else list(response)
    if not turns or format_reward(turns if len(turns) > 1 else turns[0], require_content=False) == 0.0:
        return False, []
    body = "\n".join(b for t in turns for b in tag_blocks(t, "think"))
    tags = _TAG.findall(body)
    nested = len(tags) > 0 and all(tag == ("<step>" if k % 2 == 0 else "</step>") for k, tag in enumerate(tags)) and len(tags) % 2 == 0
    steps = [s.strip() for s in tag_blocks(body, "step")] if nested else []
    return nested, steps


def step_bonus(k: int, alpha: float = 0.2, k_min: int = 2, k_max: int = 6) -> float:
    """B(K) = α·sqrt(clip((K − K_min)/(K_max − K_min), 0, 1)) (eq. 4).

    >>> step_bonus(2), step_bonus(6), round(step_bonus(4), 4)
    (0.0, 0.2, 0.1414)
    """
    span = k_max - k_min
    frac = 1.0 if span <= 0 else min(1.0, max(0.0, (k - k_min) / span))
    return alpha * math.sqrt(frac)


def success_rate(outcome: Sequence[bool] | float) -> float:
    """A sampler's answer as a rate: the mean of correctness flags, or the rate itself."""
    if isinstance(outcome, (int, float)):
        return float(outcome)
    outcome = list(outcome)
    return sum(bool(o) for o in outcome) / len(outcome) if outcome else 0.0


def prefix_success_rates(steps: Sequence[str], sampler: Sampler, num_continuations: int = 4, k_max: int = 6) -> list[float]:
    """c_i for the first min(K, K_max) prefixes, each from `num_continuations` sampled continuations (eq. 2).

    >>> prefix_success_rates(["a", "b", "c"], lambda prefix, m: [len(prefix) > 1] * m)
    [0.0, 1.0, 1.0]
    """
    return [success_rate(sampler(list(steps[:i]), num_continuations)) for i in range(1, min(len(steps), k_max) + 1)]


def rollout_process_reward(
    response: str | Sequence[str],
    accuracy: float,
    success_rates: Sequence[float] | None = None,
    sampler: Sampler | None = None,
    num_continuations: int = 4,
    k_min: int = 2,
    k_max: int = 6,
    alpha: float = 0.2,
    beta: float = 0.0,
    lambda_acc: float = 0.0,
    lambda_proc: float = 1.0,
    tau: float = 0.5,
    correct_threshold: float = 0.5,
    return_breakdown: bool = False,
) -> float | tuple[float, dict]:
    """ProcessThinker reward r of one response (eq. 6), from success rates or a continuation sampler.

    `success_rates` are c_1, c_2, … for the response's prefixes (at least min(K, K_max) of them;
    extra ones are ignored); without them `sampler` is called once per scored prefix. `accuracy`
    is the response's final-answer accuracy (correct when ≥ `correct_threshold`).
    """
    if abs(lambda_acc + lambda_proc - 1.0) > 1e-9:
        raise ValueError(f"lambda_acc + lambda_proc must be 1 (seed 004 eq. 6), got {lambda_acc} + {lambda_proc}")
    nested, steps = parse_step_response(response)
    k = len(steps)
    valid = nested and k_min <= k <= k_max
    if not valid:
        zero = {"format_valid": False, "steps": k, "process": 0.0, "bonus": 0.0, "acc_bar": 0.0, "proc_bar": 0.0, "rates": []}
        return (0.0, zero) if return_breakdown else 0.0
    scored = min(k, k_max)
    if success_rates is None:
        if sampler is None:
            raise ValueError("rollout_process_reward needs success_rates or a sampler")
        rates = prefix_success_rates(steps, sampler, num_continuations, k_max)
    else:
        if len(success_rates) < scored:
            raise ValueError(f"success_rates: need {scored} prefix rates for {k} steps, got {len(success_rates)}")
        rates = [float(c) for c in success_rates[:scored]]
    r_proc = sum(rates) / scored
    bonus = step_bonus(k, alpha, k_min, k_max)
    acc_bar = 1.0 if accuracy >= correct_threshold else -bonus
    proc_bar = r_proc if r_proc >= tau else -bonus
    reward = (1.0 + beta) + lambda_acc * acc_bar + lambda_proc * proc_bar + bonus
    if not return_breakdown:
        return reward
    return reward, {"format_valid": True, "steps": k, "process": r_proc, "bonus": bonus, "acc_bar": acc_bar, "proc_bar": proc_bar, "rates": rates}
