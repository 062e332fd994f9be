"""Composing reward families into an episode's reward: `EpisodeSummary`, `RewardConfig`, `score_episode`.

The env calls `score_episode` at the terminal step; rollout runners and the verl reward function
call the same function, so every path scores an episode identically. A preset names the seed's
combination of components and their weights; `weights` overrides any of them (0 drops one).

Presets (component: weight):
- default: accuracy 1 + format 1 (Video-R1 / MOSS-ChatV eq. 13 without the process term).

>>> class S:
...     problem_type, answer, options, duration = "multiple_choice", "B", ["A. red", "B. blue"], 10.0
>>> ep = EpisodeSummary(prediction="B", assistant_turns=["<think>blue</think><answer>B</answer>"],
...                     calls=[], invalid_calls=0, duration=10.0)
>>> score_episode(S, ep, RewardConfig())
(2.0, {'accuracy': 1.0, 'format': 1.0})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .accuracy import accuracy_reward
from .format import format_reward, ref_delta_format_reward
from .timestamps import timestamp_reward


@dataclass(frozen=True)
class EpisodeSummary:
    """What scoring needs from one finished episode (built by the env from its trajectory)."""

    prediction: str | None  # text inside the final <answer>…</answer>, None if never answered
    assistant_turns: list[str]  # raw assistant texts, in order
    calls: list[tuple[float, float]]  # accepted crop_video calls in call order, clipped to [0, duration]
    invalid_calls: int  # malformed / rejected tool calls
    duration: float  # seconds
    truncated: bool = False  # ended by a budget rather than an answer
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)  # free-form, e.g. success rates


PRESETS: dict[str, dict[str, float]] = {
    "default": {"accuracy": 1.0, "format": 1.0},
}

COMPONENTS = ("accuracy", "format", "ref_delta_format", "timestamp")


class RewardConfig(BaseModel):
    """Which reward components an episode gets and with what weights.

    `preset` picks a seed's combination; `weights` overrides single components (a weight of 0
    removes one). Component names: accuracy, format, ref_delta_format, timestamp.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: str = "default"
    weights: dict[str, float] = Field(default_factory=dict)
    strict_decimal: bool = False  # Video-R1's decimal-point rule for numerical answers
    format_require_content: bool = True  # think and answer tags must hold text

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

    def component_weights(self) -> dict[str, float]:
        """The preset's weights updated by `weights`, without zero-weight components."""
        merged = {**PRESETS[self.preset], **self.weights}
        return {k: v for k, v in merged.items() if v != 0}


_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


def thinking_text(turns: list[str]) -> str:
    """All `<think>` contents of an episode, in order, one paragraph each."""
    return "\n".join(m.strip() for t in turns for m in _THINK_BLOCK.findall(t))


def episode_components(sample: Any, episode: EpisodeSummary, config: RewardConfig) -> dict[str, float]:
    """Each configured component's value for one episode (unweighted)."""
    wanted = config.component_weights()
    out: dict[str, float] = {}
    if "accuracy" in wanted:
        out["accuracy"] = accuracy_reward(episode.prediction, sample, strict_decimal=config.strict_decimal)
    if "format" in wanted:
        out["format"] = format_reward(episode.assistant_turns, require_content=config.format_require_content)
    if "ref_delta_format" in wanted:
        out["ref_delta_format"] = float(ref_delta_format_reward(episode.assistant_turns))
    if "timestamp" in wanted:
        out["timestamp"] = timestamp_reward("\n".join(episode.assistant_turns), episode.duration)
    return out


def score_episode(sample: Any, episode: EpisodeSummary, config: RewardConfig | None = None) -> tuple[float, dict[str, float]]:
    """(weighted total, components) of one episode under `config` (the default preset if None)."""
    config = config or RewardConfig()
    components = episode_components(sample, episode, config)
    weights = config.component_weights()
    total = sum(weights[k] * v for k, v in components.items())
    return total, components
