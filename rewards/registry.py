"""Reward components: the interface every reward term implements (`RewardComponent`) and its registry.

A reward component is one class in one file, registered under its name (as a tool is:
`envs/tools/base.py`). The class says everything the rest of VideoSeek needs to know about it:

- `name`: the key in `RewardConfig.weights`, in each episode's `reward_components` and in the presets.
- `Params` (optional): a pydantic model of its parameters, seed values as defaults (subclass
  `ComponentParams`). `RewardConfig` holds one block of it under the component's name:
  `RewardConfig(brevity={"limit": 300})`, read back as `config.brevity` or `config.params("brevity")`.
- `score(ctx)`: its value for one episode. `EpisodeContext` holds the sample, the `EpisodeSummary`,
  the config, ProcessThinker's success rates and the components scored before it (in registration
  order; accuracy and format come first, so every component can read `ctx.accuracy`).
- `group_kind`: a group component compares the episode with a perturbed group of the same sample
  ("mask", "shuffle", "blend"). The drivers plan that group (`RewardConfig.group_kinds`) and
  `score_group` calls `score_in_group(scored, group)` once it is played; `score` is not called.
- `needs_continuations`: the drivers sample M continuations of each step prefix of an episode and
  pass their success rates (ProcessThinker's c_i). Drivers read `RewardConfig.needs_continuations()`,
  never a component's name.
- `gated_by`: the component whose value opens this one's gate: this one is zeroed when that value is
  below `RewardConfig.gate()` (VideoMend §6.3: timestamp and delta_mask are gated by ref_delta_format).
  The viewer's reward panel shows the gates it is served (`viewer/rewardinfo.py`).
- `reported`: computed and reported in every episode, whatever the weights (accuracy, format).
- `summary`, `source`: what it rewards and where the rule comes from, one line each (the preset
  tables of the README and docs, `rewards/presets.py`).

`register_component(cls)` files a class (also as a class decorator); `get_component(spec)` returns a
registered one or imports "package.module:Class" / "path/to/file.py:Class" and registers it. A
`RewardConfig(components=[spec, ...])` imports its specs before it reads `weights`, so a run's
record loads in a process that never imported the component (verl's workers, the viewer).

>>> class Brevity(RewardComponent):
...     name = "brevity"
...     summary = "1 when the final turn is at most `limit` characters"
...     class Params(ComponentParams):
...         limit: int = 300
...     def score(self, ctx):
...         return 1.0 if len(ctx.episode.assistant_turns[-1]) <= ctx.params.limit else 0.0
>>> Brevity.Params(limit=-1).limit, Brevity.group_kind, Brevity.needs_continuations
(-1, None, False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from .imports import import_subclass, same_class

if TYPE_CHECKING:  # compose imports this module
    from .compose import EpisodeSummary, RewardConfig


class ComponentParams(BaseModel):
    """Base of a component's parameter block: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def sample_field(sample: Any, name: str, default: Any = None) -> Any:
    """A field of a sample given as an object (`VideoSample`) or a mapping (a verl row's extra info)."""
    return sample.get(name, default) if isinstance(sample, Mapping) else getattr(sample, name, default)


@dataclass
class EpisodeContext:
    """What a component's `score` reads for one episode.

    scored: the components of this episode scored so far (registration order: accuracy first).
    success_rates: ProcessThinker's c_i of this episode (from the driver's continuations), or None.
    params: the scoring component's parameter block (`RewardConfig.params(name)`; None without `Params`).
    """

    sample: Any
    episode: EpisodeSummary
    config: RewardConfig
    scored: dict[str, float]
    success_rates: Sequence[float] | None = None
    params: Any = None

    def field(self, name: str, default: Any = None) -> Any:
        """A sample field (`clue_intervals`, `key_frames`, `reference_reasoning`, …)."""
        return sample_field(self.sample, name, default)

    @property
    def accuracy(self) -> float:
        return self.scored["accuracy"]

    @property
    def correct(self) -> bool:
        return self.scored["accuracy"] >= self.config.correct_threshold


@dataclass
class GroupContext:
    """What a group component's `score_in_group` reads: one sample's origin group and the perturbed
    group of the component's `group_kind`.

    origin_accuracy: p, the origin group's mean accuracy (fraction correct for binary types).
    perturbed_accuracy: p̃, the same of the perturbed group.
    perturbed: that group's episodes; perturbation: its record (DM-GRPO's `oracle_correct`, `pattern`).
    """

    sample: Any
    config: RewardConfig
    origin_accuracy: float
    perturbed_accuracy: float
    perturbed: Sequence[EpisodeSummary]
    perturbation: Mapping[str, Any] | None = None
    params: Any = None

    def correct(self, scored: Mapping[str, float]) -> bool:
        """Is the origin episode whose components are `scored` correct (accuracy ≥ the threshold)?"""
        return scored["accuracy"] >= self.config.correct_threshold


class RewardComponent:
    """One reward term. Subclass it, set the class attributes, implement `score` (or, for a group
    component, `score_in_group`), register it (module docstring)."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[ComponentParams] | None] = None
    group_kind: ClassVar[str | None] = None
    needs_continuations: ClassVar[bool] = False
    gated_by: ClassVar[str | None] = None
    reported: ClassVar[bool] = False
    summary: ClassVar[str] = ""
    source: ClassVar[str] = ""

    def score(self, ctx: EpisodeContext) -> float:
        """The component's value for one episode."""
        raise NotImplementedError(f"reward component {self.name!r} scores no single episode (group_kind {self.group_kind!r})")

    def score_in_group(self, scored: Mapping[str, float], group: GroupContext) -> float:
        """A group component's value for one origin episode (its components so far: `scored`)."""
        raise NotImplementedError(f"reward component {self.name!r} has no group score")


# ---- the registry --------------------------------------------------------------------------------
REWARD_COMPONENTS: dict[str, RewardComponent] = {}  # name -> the component, in scoring order
_RESERVED: set[str] = set()  # RewardConfig's own field names (`reserve_names`): no component may take one


def reserve_names(names: Iterable[str]) -> None:
    """Names no component may take (`RewardConfig` reserves its fields, where the parameter blocks live)."""
    _RESERVED.update(names)
    taken = _RESERVED & set(REWARD_COMPONENTS)
    if taken:
        raise ValueError(f"reward component names {sorted(taken)} are RewardConfig fields")


def register_component(cls: type[RewardComponent]) -> type[RewardComponent]:
    """Register `cls` under `cls.name` (usable as a class decorator); it is scored after those
    registered before it.

    Registering the same class again is a no-op, and so is a class of the same name from the same
    file imported a second time. Raises ValueError for a class that is no `RewardComponent`, has
    no identifier as its name, takes a name another class holds or a `RewardConfig` field's, or
    has a `Params` that is no pydantic model.
    """
    if not (isinstance(cls, type) and issubclass(cls, RewardComponent)):
        raise ValueError(f"register_component takes a RewardComponent subclass, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name.isidentifier() or cls.name in _RESERVED:
        raise ValueError(f"reward component {cls.__qualname__} needs a name that is a Python identifier and no RewardConfig field, got {cls.name!r}")
    if cls.Params is not None and not (isinstance(cls.Params, type) and issubclass(cls.Params, BaseModel)):
        raise ValueError(f"reward component {cls.name!r}: Params must be a pydantic model (subclass ComponentParams)")
    held = REWARD_COMPONENTS.get(cls.name)
    if held is not None and not same_class(type(held), cls):
        raise ValueError(f"reward component name {cls.name!r} is already registered by {type(held).__module__}.{type(held).__qualname__}")
    if held is None or type(held) is not cls:
        REWARD_COMPONENTS[cls.name] = cls()
    return cls


def unregister_component(name: str) -> None:
    """Remove a registered component (tests that register one of their own clean up with it)."""
    REWARD_COMPONENTS.pop(name, None)


def get_component(spec: str) -> RewardComponent:
    """The component of a registered name or of an import path "package.module:Class" or
    "path/to/file.py:Class" (registered on import). Raises ValueError naming the spec otherwise."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"a reward component is a registered name or 'package.module:Class', got {spec!r}")
    if spec in REWARD_COMPONENTS:
        return REWARD_COMPONENTS[spec]
    if ":" in spec:
        cls = register_component(import_subclass(spec, RewardComponent, "reward component"))
        return REWARD_COMPONENTS[cls.name]
    raise ValueError(f"unknown reward component {spec!r}; registered: {', '.join(REWARD_COMPONENTS)} (or give an import path 'package.module:Class')")
