"""Composing reward families into episode and group rewards: `EpisodeSummary`, `RewardConfig`,
`score_episode`, `score_group`.

The env calls `score_episode` at the terminal step; rollout runners and the verl reward function
call `score_group` once a sample's group is done, so every path scores identically. A preset names
a seed's combination of components and weights (`rewards/presets.py`); `weights` overrides any of
them (0 drops one). The weighted sum loops over the registered components (`rewards/registry.py`,
the built-ins in `rewards/components.py`): compose knows no component by name.

>>> class S:
...     problem_type, answer, options, duration = "multiple_choice", "B", ["A. red", "B. blue"], 10.0
>>> ep = EpisodeSummary(prediction="B", assistant_turns=["<think>blue</think><answer>B</answer>"],
...                     calls=[], invalid_calls=0, duration=10.0)
>>> score_episode(S, ep, RewardConfig(preset="default"))
(2.0, {'accuracy': 1.0, 'format': 1.0})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, model_validator

from .accuracy import accuracy_reward
from .delta_mask import group_accuracy
from .presets import DEFAULT_PRESET, PRESET_GATES, PRESETS
from .registry import REWARD_COMPONENTS, EpisodeContext, GroupContext, RewardComponent, get_component, reserve_names


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
    call_frames: list[tuple[float, ...] | None] = field(default_factory=list)  # times of the frames each of `calls` returned (None: not recorded)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)  # e.g. {"success_rates": [...]}


COMPONENTS = REWARD_COMPONENTS.keys()  # the registered component names, live: a component registered later is in it


class RewardConfig(BaseModel):
    """Which reward components an episode gets, with what weights and parameters.

    `preset` picks a seed's combination (`rewards/presets.py`; default `csgrpo`); `weights`
    overrides single components (0 removes one; a component named with weight 0 is still computed
    and reported). `format_gate` zeroes the gated components (`timestamp`, `delta_mask`) when
    their gate (`ref_delta_format`) is below it (None: the preset's gate, 0.4 for dmgrpo).

    Every registered component with parameters has a block here under its name, seed values by
    default: `clue_seek`, `grounding`, `process`, `delta_mask`, `temporal`, `consistency`,
    `process_thinker`, and any registered later (`rewards/registry.py`). `components` lists import
    paths of components to register first ("package.module:Class", "path/file.py:Class"), so a
    dumped config loads where nothing imported them; it is written only when not empty.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    preset: str = DEFAULT_PRESET
    weights: dict[str, float] = Field(default_factory=dict)
    format_gate: float | None = None
    strict_decimal: bool = False  # Video-R1's decimal-point rule for numerical answers
    format_require_content: bool = True  # think and answer tags must hold text
    correct_threshold: float = 0.5  # an answer is correct when its accuracy reaches this
    timestamp_weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    components: tuple[str, ...] = ()  # import paths of components registered before `weights` is read

    @model_validator(mode="before")
    @classmethod
    def _component_blocks(cls, data: Any) -> Any:
        """Import `components`, then read each registered component's parameter block (defaults when
        absent); any other unknown key is an error naming it."""
        if not isinstance(data, Mapping):
            return data
        for spec in data.get("components") or ():
            get_component(spec)
        fixed = {k: v for k, v in data.items() if k in cls.model_fields}
        for key in data:
            if key not in cls.model_fields and (key not in REWARD_COMPONENTS or REWARD_COMPONENTS[key].Params is None):
                raise ValueError(f"{key}: unknown field; expected one of {', '.join(cls.model_fields)} or a component's parameters ({', '.join(n for n, c in REWARD_COMPONENTS.items() if c.Params)})")
        blocks = {}
        for name, component in REWARD_COMPONENTS.items():
            if component.Params is None:
                continue
            value = data.get(name, {})
            try:
                blocks[name] = value if isinstance(value, component.Params) else component.Params.model_validate(value)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in (name, *first["loc"]))
                raise ValueError(f"{where}: {first['msg']}") from None
        return {**fixed, **blocks}

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if not out.get("components"):
            out.pop("components", None)  # a config of built-in components dumps as it always did
        return out

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
            if name not in REWARD_COMPONENTS:
                raise ValueError(f"weights: unknown component {name!r}; expected one of {', '.join(REWARD_COMPONENTS)}")
        return weights

    def params(self, name: str) -> Any:
        """The parameter block of component `name` (None for a component without `Params`)."""
        return (self.__pydantic_extra__ or {}).get(name)

    def merged_weights(self) -> dict[str, float]:
        """The preset's weights (its row of `PRESETS`, as written there) updated by `weights`, zero
        weights included (those are reported only). DM-GRPO's λ is `weights={"timestamp": λ}`."""
        return {**PRESETS[self.preset], **self.weights}

    def component_weights(self) -> dict[str, float]:
        """The non-zero weights: the components that make up the total."""
        return {k: v for k, v in self.merged_weights().items() if v != 0}

    def gate(self) -> float | None:
        """The value the gated components' gate must reach (None: no gate)."""
        return self.format_gate if self.format_gate is not None else PRESET_GATES.get(self.preset)

    def gates(self) -> dict[str, str]:
        """Gated component -> the component that opens its gate, for this config's components
        (empty without a gate). The viewer shows these; `apply_gate` applies them."""
        if self.gate() is None:
            return {}
        return {name: c.gated_by for name in self.merged_weights() if (c := REWARD_COMPONENTS.get(name)) is not None and c.gated_by}

    def group_kinds(self) -> list[str]:
        """Perturbation kinds whose groups this config needs (for `score_group`)."""
        kinds = (REWARD_COMPONENTS[c].group_kind for c in self.component_weights())
        return list(dict.fromkeys(k for k in kinds if k))

    def needs_continuations(self) -> bool:
        """Do the drivers sample continuations of each step prefix (a counted component needs them: ProcessThinker)?"""
        return any(REWARD_COMPONENTS[c].needs_continuations for c in self.component_weights())


reserve_names(RewardConfig.model_fields)


def _openers(config: RewardConfig) -> set[str]:
    """The components that open a gate, computed whenever the config has a gate."""
    if config.gate() is None:
        return set()
    return {c.gated_by for c in REWARD_COMPONENTS.values() if c.gated_by}


def episode_components(
    sample: Any, episode: EpisodeSummary, config: RewardConfig, success_rates: Sequence[float] | None = None
) -> dict[str, float]:
    """Each per-episode component of `config` for one episode (unweighted; gates applied), in
    registration order.

    The `reported` components (accuracy and format) are always there: they are cheap and every
    log wants them. `success_rates` (else `episode.metadata["success_rates"]`) are ProcessThinker's c_i.
    """
    wanted = set(config.merged_weights()) | _openers(config)
    rates = success_rates if success_rates is not None else episode.metadata.get("success_rates")
    ctx = EpisodeContext(sample, episode, config, {}, rates)
    for name, component in REWARD_COMPONENTS.items():
        if component.group_kind is None and (component.reported or name in wanted):
            ctx.params = config.params(name)
            ctx.scored[name] = float(component.score(ctx))
    return apply_gate(ctx.scored, config)


def apply_gate(components: dict[str, float], config: RewardConfig) -> dict[str, float]:
    """Zero each gated component (its `gated_by`) whose gate's value is below the config's gate
    (VideoMend §6.3); in place, and returned. The one place the gate is applied."""
    gate = config.gate()
    if gate is None:
        return components
    for name in components:
        component = REWARD_COMPONENTS.get(name)
        if component is not None and component.gated_by and components.get(component.gated_by, 1.0) < gate:
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


def _group_components(config: RewardConfig) -> list[RewardComponent]:
    weights = config.component_weights()
    return [c for name, c in REWARD_COMPONENTS.items() if c.group_kind and name in weights]


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
    contexts = [
        (c, GroupContext(sample, config, origin_acc, group_acc[c.group_kind], groups[c.group_kind], perturbation, config.params(c.name)))
        for c in _group_components(config)
    ]  # fmt: skip
    results = []
    for comps in per_episode:
        for component, group in contexts:
            comps[component.name] = float(component.score_in_group(comps, group))
        results.append((total_reward(apply_gate(comps, config), config), comps))
    return results
