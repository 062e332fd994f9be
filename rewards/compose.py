"""Composing reward families into episode and group rewards: `EpisodeSummary`, `RewardConfig`,
`score_episode`, `score_group`.

The env calls `score_episode` at the terminal step; rollout runners and the verl reward function
call `score_group` once a sample's group is done, so every path scores identically. A preset names
a seed's combination of components and weights; `weights` overrides any of them (0 drops one).

Presets (component: weight; "group" components need `score_group`):
- default: accuracy 1 + format 1 (Video-R1); chosen by name only, despite its name.
- csgrpo, the default everywhere (`RewardConfig()`, the env, the CLI, play mode): accuracy 1 +
  format 1 + clue_seek 1 + grounding 1 (Open-o3-Video-v2: "combine the tool-use score with
  answer accuracy, output-format, and grounded-thinking rewards"; the seed gives no weights, so
  they are equal as in Open-o3-Video v1's sum).
- dmgrpo: accuracy 1 + timestamp λ=0.2 + delta_mask 1 (group), with timestamp and delta_mask
  zeroed when ref_delta_format < 0.4 (VideoMend eq. 2 and §6.3; ref_delta_format is reported
  with weight 0 since the seed's R uses it only as the gate).
- tgrpo: accuracy 1 + format 1 + temporal 1 (group; Video-R1 T-GRPO shuffle contrast).
- sfgrpo: accuracy 1 + format 1 + consistency 1 (group; VideoMend §8.2 blend contrast).
- prr: accuracy 1 + format 1 + process 1 (MOSS-ChatV eq. 13).
- processthinker: process_thinker 1 (ProcessThinker eq. 6, which contains accuracy and format
  itself; accuracy and format are reported with weight 0).

>>> class S:
...     problem_type, answer, options, duration = "multiple_choice", "B", ["A. red", "B. blue"], 10.0
>>> ep = EpisodeSummary(prediction="B", assistant_turns=["<think>blue</think><answer>B</answer>"],
...                     calls=[], invalid_calls=0, duration=10.0)
>>> score_episode(S, ep, RewardConfig(preset="default"))
(2.0, {'accuracy': 1.0, 'format': 1.0})
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .accuracy import accuracy_reward
from .clue_seek import ClueSeekParams, clue_seek_reward
from .delta_mask import FORMAT_GATE, TIMESTAMP_WEIGHT, delta_mask_reward, group_accuracy, sfgrpo_bonus, tgrpo_bonus
from .format import format_reward, ref_delta_format_reward, scan_end
from .grounding import grounding_reward
from .process import process_reward
from .process_thinker import parse_step_response, rollout_process_reward
from .timestamps import timestamp_reward


@dataclass(frozen=True)
class EpisodeSummary:
    """What scoring needs from one finished episode (built by the env from its trajectory)."""

    prediction: str | None  # text inside the final <answer>…</answer>, None if never answered
    assistant_turns: list[str]  # raw assistant texts, in order
    calls: list[tuple[float, float]]  # spans of the accepted span-retrieving calls (crop_video), in order, clipped to [0, duration]
    invalid_calls: int  # malformed / rejected tool calls
    duration: float  # seconds
    truncated: bool = False  # ended by a budget rather than an answer
    zooms: list[tuple[float, list[float]]] = field(default_factory=list)  # accepted zoom calls: (frame time, box)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)  # e.g. {"success_rates": [...]}


# ---- parameters of each family (seed values as defaults; see each module) ---------------------
class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GroundingParams(_Params):
    sigma: float = Field(2.0, gt=0)
    time_gate: float = Field(2.0, ge=0)
    temporal_weight: float = 0.5
    spatial_weight: float = 0.5


class ProcessParams(_Params):
    alpha: float = Field(1.0, gt=0)
    k_ref: int = Field(2, ge=1)
    k_target: int = Field(2, ge=1)
    method: Literal["regex", "pysbd"] = "regex"
    normalize: bool = False


class DeltaMaskParams(_Params):
    alpha: float = 0.3
    gamma: float = -0.2
    tau: float = 0.5
    # λ (eq. 2) is the preset's `timestamp` weight and the gate is `RewardConfig.format_gate`: one place each.


class TemporalParams(_Params):
    alpha: float = 0.3
    mu: float = 0.8


class ConsistencyParams(_Params):
    high: float = 0.3
    low: float = 0.1
    tau: float = 0.5


class ProcessThinkerParams(_Params):
    num_continuations: int = Field(4, ge=1)
    k_min: int = Field(2, ge=0)
    k_max: int = Field(6, ge=1)
    alpha: float = 0.2
    beta: float = 0.0
    lambda_acc: float = 0.0
    lambda_proc: float = 1.0
    tau: float = 0.5


EPISODE_COMPONENTS = ("accuracy", "format", "ref_delta_format", "timestamp", "clue_seek", "grounding", "process", "process_thinker")
GROUP_COMPONENTS = {"delta_mask": "mask", "temporal": "shuffle", "consistency": "blend"}  # component -> perturbation kind
COMPONENTS = EPISODE_COMPONENTS + tuple(GROUP_COMPONENTS)
GATED = ("timestamp", "delta_mask")  # zeroed when ref_delta_format is below the format gate

PRESETS: dict[str, dict[str, float]] = {
    "default": {"accuracy": 1.0, "format": 1.0},
    "csgrpo": {"accuracy": 1.0, "format": 1.0, "clue_seek": 1.0, "grounding": 1.0},
    "dmgrpo": {"accuracy": 1.0, "ref_delta_format": 0.0, "timestamp": TIMESTAMP_WEIGHT, "delta_mask": 1.0},
    "tgrpo": {"accuracy": 1.0, "format": 1.0, "temporal": 1.0},
    "sfgrpo": {"accuracy": 1.0, "format": 1.0, "consistency": 1.0},
    "prr": {"accuracy": 1.0, "format": 1.0, "process": 1.0},
    "processthinker": {"accuracy": 0.0, "format": 0.0, "process_thinker": 1.0},
}
PRESET_GATES: dict[str, float] = {"dmgrpo": FORMAT_GATE}


class RewardConfig(BaseModel):
    """Which reward components an episode gets, with what weights and parameters.

    `preset` picks a seed's combination (see the module docstring; default `csgrpo`); `weights` overrides single
    components (0 removes one; a component named with weight 0 is still computed and reported).
    `format_gate` zeroes `timestamp` and `delta_mask` when `ref_delta_format` is below it
    (None: the preset's gate, 0.4 for dmgrpo). The per-family parameter blocks default to the
    seeds' values.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = "csgrpo"
    weights: dict[str, float] = Field(default_factory=dict)
    format_gate: float | None = None
    strict_decimal: bool = False  # Video-R1's decimal-point rule for numerical answers
    format_require_content: bool = True  # think and answer tags must hold text
    correct_threshold: float = 0.5  # an answer is correct when its accuracy reaches this
    timestamp_weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    clue_seek: ClueSeekParams = Field(default_factory=ClueSeekParams)
    grounding: GroundingParams = Field(default_factory=GroundingParams)
    process: ProcessParams = Field(default_factory=ProcessParams)
    delta_mask: DeltaMaskParams = Field(default_factory=DeltaMaskParams)
    temporal: TemporalParams = Field(default_factory=TemporalParams)
    consistency: ConsistencyParams = Field(default_factory=ConsistencyParams)
    process_thinker: ProcessThinkerParams = Field(default_factory=ProcessThinkerParams)

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, name: str) -> str:
        if name not in PRESETS:
            raise ValueError(f"preset: unknown {name!r}; expected one of {', '.join(PRESETS)}")
        return name

    @field_validator("weights")
    @classmethod
    def _known_components(cls, weights: dict[str, float]) -> dict[str, float]:
        for name in weights:
            if name not in COMPONENTS:
                raise ValueError(f"weights: unknown component {name!r}; expected one of {', '.join(COMPONENTS)}")
        return weights

    def merged_weights(self) -> dict[str, float]:
        """The preset's weights (its row of `PRESETS`, as written there) updated by `weights`, zero
        weights included (those are reported only). DM-GRPO's λ is `weights={"timestamp": λ}`."""
        return {**PRESETS[self.preset], **self.weights}

    def component_weights(self) -> dict[str, float]:
        """The non-zero weights: the components that make up the total."""
        return {k: v for k, v in self.merged_weights().items() if v != 0}

    def gate(self) -> float | None:
        return self.format_gate if self.format_gate is not None else PRESET_GATES.get(self.preset)

    def group_kinds(self) -> list[str]:
        """Perturbation kinds whose groups this config needs (for `score_group`)."""
        return [GROUP_COMPONENTS[c] for c in self.component_weights() if c in GROUP_COMPONENTS]


_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def thinking_text(turns: Sequence[str]) -> str:
    """All `<think>` contents of an episode, in order, one paragraph each (linear time: `scan_end`)."""
    return "\n".join(m.strip() for t in turns for m in _THINK_BLOCK.findall(t, 0, scan_end(t, "</think>")))


def _attr(sample: Any, name: str, default: Any = None) -> Any:
    return sample.get(name, default) if isinstance(sample, Mapping) else getattr(sample, name, default)


def _process_thinker(sample: Any, episode: EpisodeSummary, config: RewardConfig, accuracy: float, rates: Sequence[float] | None) -> float:
    """ProcessThinker eq. 6. Without sampled rates, each prefix's success is the episode's own
    outcome: the rollout itself is one continuation of every one of its prefixes (M = 1)."""
    p = config.process_thinker
    if rates is None:
        _, steps = parse_step_response(episode.assistant_turns)
        outcome = 1.0 if accuracy >= config.correct_threshold else 0.0
        rates = [outcome] * min(len(steps), p.k_max)
    return float(
        rollout_process_reward(
            episode.assistant_turns, accuracy, success_rates=rates, num_continuations=p.num_continuations,
            k_min=p.k_min, k_max=p.k_max, alpha=p.alpha, beta=p.beta, lambda_acc=p.lambda_acc,
            lambda_proc=p.lambda_proc, tau=p.tau, correct_threshold=config.correct_threshold,
        )
    )  # fmt: skip


def episode_components(
    sample: Any, episode: EpisodeSummary, config: RewardConfig, success_rates: Sequence[float] | None = None
) -> dict[str, float]:
    """Each per-episode component of `config` for one episode (unweighted; gates applied).

    accuracy and format are always reported (they are cheap and every log wants them).
    """
    wanted = set(config.merged_weights()) | {"accuracy", "format"}
    if config.gate() is not None:
        wanted.add("ref_delta_format")
    turns = episode.assistant_turns
    out: dict[str, float] = {}
    accuracy = accuracy_reward(episode.prediction, sample, strict_decimal=config.strict_decimal)
    out["accuracy"] = accuracy
    out["format"] = format_reward(turns, require_content=config.format_require_content)
    if "ref_delta_format" in wanted:
        out["ref_delta_format"] = float(ref_delta_format_reward(turns))
    if "timestamp" in wanted:
        out["timestamp"] = timestamp_reward("\n".join(turns), episode.duration, config.timestamp_weights)
    if "clue_seek" in wanted:
        out["clue_seek"] = float(
            clue_seek_reward(episode.calls, _attr(sample, "clue_intervals", []) or [], episode.duration, episode.invalid_calls,
                             params=config.clue_seek, zooms=episode.zooms, key_frames=_attr(sample, "key_frames", []) or [])
        )
        if config.clue_seek.paid_if_correct and accuracy < config.correct_threshold:
            out["clue_seek"] = min(out["clue_seek"], 0.0)
    if "grounding" in wanted:
        g = config.grounding
        out["grounding"] = float(
            grounding_reward(thinking_text(turns), _attr(sample, "key_frames", []) or [], g.sigma, g.time_gate, g.temporal_weight, g.spatial_weight)
        )
    if "process" in wanted:
        reference = _attr(sample, "reference_reasoning")
        p = config.process
        out["process"] = (
            float(process_reward(thinking_text(turns) or "\n".join(turns), reference, p.alpha, p.k_ref, p.k_target, p.method, p.normalize))
            if reference
            else 0.0
        )
    if "process_thinker" in wanted:
        rates = success_rates if success_rates is not None else episode.metadata.get("success_rates")
        out["process_thinker"] = _process_thinker(sample, episode, config, accuracy, rates)
    return apply_gate(out, config)


def apply_gate(components: dict[str, float], config: RewardConfig) -> dict[str, float]:
    """Zero the gated components (`GATED`) when ref_delta_format is below the config's gate
    (VideoMend §6.3); in place, and returned. The one place the gate is applied."""
    gate = config.gate()
    if gate is not None and components.get("ref_delta_format", 1.0) < gate:
        for name in GATED:
            if name in components:
                components[name] = 0.0
    return components


def weighted_terms(components: Mapping[str, float], config: RewardConfig) -> dict[str, float]:
    """weight × value of each component that counts (non-zero weight): the terms of the total.

    >>> weighted_terms({"accuracy": 1.0, "format": 0.5}, RewardConfig(preset="default", weights={"format": 2.0}))
    {'accuracy': 1.0, 'format': 1.0}
    """
    weights = config.component_weights()
    return {k: weights[k] * v for k, v in components.items() if k in weights}


def total_reward(components: Mapping[str, float], config: RewardConfig) -> float:
    """The reward: the sum of `weighted_terms` (every driver's and reader's total comes from here)."""
    return sum(weighted_terms(components, config).values())


def score_episode(sample: Any, episode: EpisodeSummary, config: RewardConfig | None = None) -> tuple[float, dict[str, float]]:
    """(weighted total, components) of one episode under `config` (the default preset if None).

    Group components (delta_mask, temporal, consistency) need the perturbed group and are added
    by `score_group`; here they are absent, so the total is the per-episode part.
    """
    config = config or RewardConfig()
    components = episode_components(sample, episode, config)
    return total_reward(components, config), components


def _oracle_label(sample: Any, masked: Sequence[EpisodeSummary], perturbation: Mapping[str, Any] | None) -> bool:
    """c of DM-GRPO: from the perturbation record, the masked episodes, or the sample's only pattern."""
    for source in (perturbation or {}, *(ep.metadata for ep in masked)):
        if "oracle_correct" in source:
            return bool(source["oracle_correct"])
        if source.get("pattern") is not None:
            return bool(_attr(_attr(sample, "mask_patterns")[int(source["pattern"])], "oracle_correct"))
    patterns = _attr(sample, "mask_patterns", []) or []
    if len(patterns) == 1:
        return bool(_attr(patterns[0], "oracle_correct"))
    raise ValueError("perturbation: DM-GRPO needs oracle_correct or the mask pattern index of the masked group")


def score_group(
    samples: Any,
    origin: Sequence[EpisodeSummary],
    perturbed: Mapping[str, Sequence[EpisodeSummary]] | Sequence[EpisodeSummary] | None = None,
    config: RewardConfig | None = None,
    success_rates: Sequence[Sequence[float] | None] | None = None,
    perturbation: Mapping[str, Any] | None = None,
) -> list[tuple[float, dict[str, float]]]:
    """Final (total, components) of every origin episode of one sample's group.

    Arguments (what rollout runners and the verl integration have at hand):
        samples: the group's sample, or one sample per origin episode (all the same question).
        origin: the origin group's `EpisodeSummary`s, in order.
        perturbed: perturbation kind ("mask", "shuffle", "blend") -> that group's summaries for
            the same sample; a plain list is taken as the group of the kind the preset needs.
            Only the kinds `config.group_kinds()` names are read.
        config: the `RewardConfig` (default preset if None).
        success_rates: ProcessThinker c_i per origin episode (None entries fall back to
            `episode.metadata["success_rates"]`, then to the episode's own outcome).
        perturbation: the masked group's perturbation record (`oracle_correct` and/or `pattern`,
            the index into `sample.mask_patterns`), for DM-GRPO's oracle label c.

    Group components: delta_mask (r_dm with p̃ = the masked group's mean accuracy; VideoMend eq. 1),
    temporal (T-GRPO: +α to correct answers when the origin accuracy p ≥ μ·p̃ of the shuffled
    group), consistency (SF-GRPO). A needed group that is missing or empty raises ValueError.

    >>> class S:
    ...     problem_type, answer, options, duration = "multiple_choice", "B", ["A. left", "B. right"], 10.0
    >>> def ep(answer):
    ...     return EpisodeSummary(answer, [f"<think>moves</think><answer>{answer}</answer>"], [], 0, 10.0)
    >>> out = score_group(S, [ep("B"), ep("A")], {"shuffle": [ep("A"), ep("A")]}, RewardConfig(preset="tgrpo"))
    >>> [(total, parts["temporal"]) for total, parts in out]   # p = 0.5 >= 0.8 * 0: +0.3 if correct
    [(2.3, 0.3), (1.0, 0.0)]
    """
    config = config or RewardConfig()
    samples_list = list(samples) if isinstance(samples, (list, tuple)) else [samples] * len(origin)
    if len(samples_list) != len(origin):
        raise ValueError(f"samples: got {len(samples_list)} for {len(origin)} origin episodes")
    rates_list = list(success_rates) if success_rates is not None else [None] * len(origin)
    if len(rates_list) != len(origin):
        raise ValueError(f"success_rates: got {len(rates_list)} for {len(origin)} origin episodes")
    per_episode = [episode_components(s, ep, config, r) for s, ep, r in zip(samples_list, origin, rates_list)]

    kinds = config.group_kinds()
    if isinstance(perturbed, Mapping):
        groups = dict(perturbed)
    elif perturbed is not None:
        if len(kinds) != 1:
            raise ValueError(f"perturbed: a plain list is ambiguous for a config that needs {kinds or 'no'} groups; pass a mapping kind -> episodes")
        groups = {kinds[0]: list(perturbed)}
    else:
        groups = {}
    sample = samples_list[0] if samples_list else None
    group_acc: dict[str, float] = {}
    for kind in kinds:
        episodes = groups.get(kind) or []
        if not episodes:
            raise ValueError(f"perturbed: preset {config.preset!r} needs a non-empty {kind!r} group")
        group_acc[kind] = group_accuracy([accuracy_reward(ep.prediction, sample, strict_decimal=config.strict_decimal) for ep in episodes])
    origin_acc = group_accuracy([c["accuracy"] for c in per_episode])
    weights = config.component_weights()
    results = []
    for comps in per_episode:
        correct = comps["accuracy"] >= config.correct_threshold
        if "delta_mask" in weights:
            d = config.delta_mask
            oracle = _oracle_label(sample, groups["mask"], perturbation)
            comps["delta_mask"] = delta_mask_reward(correct, group_acc["mask"], oracle, d.alpha, d.gamma, d.tau)
        if "temporal" in weights:
            comps["temporal"] = tgrpo_bonus(correct, origin_acc, group_acc["shuffle"], config.temporal.alpha, config.temporal.mu)
        if "consistency" in weights:
            c = config.consistency
            comps["consistency"] = sfgrpo_bonus(correct, group_acc["blend"], c.high, c.low, c.tau)
        results.append((total_reward(apply_gate(comps, config), config), comps))
    return results
