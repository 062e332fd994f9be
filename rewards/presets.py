"""Reward presets: each seed's combination of components and weights (`PRESETS`), and the tables
the README, docs/training.md, docs/rewards.md and the `--reward` help are generated from.

A preset is a row of weights over registered components (`rewards/components.py`); a weight of 0
reports a component without counting it ("group" components need `score_group`):
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
 `RewardConfig(preset=...)` starts from the row and
`weights` overrides it. `preset_table()` writes the markdown table that `make docs`
(`docs/make_docs.py`) puts between the `<!-- presets:begin -->` / `<!-- presets:end -->` markers;
`tests/rewards/test_preset_tables.py` fails when a checked-in table differs from it.

>>> print(preset_help().split(", csgrpo")[0])
default (accuracy, format)
"""

from __future__ import annotations

from . import components as _builtin  # noqa: F401 - registers the built-in components the rows name
from .delta_mask import FORMAT_GATE, TIMESTAMP_WEIGHT
from .registry import REWARD_COMPONENTS

PRESETS: dict[str, dict[str, float]] = {
    "default": {"accuracy": 1.0, "format": 1.0},
    "csgrpo": {"accuracy": 1.0, "format": 1.0, "clue_seek": 1.0, "grounding": 1.0},
    "dmgrpo": {"accuracy": 1.0, "ref_delta_format": 0.0, "timestamp": TIMESTAMP_WEIGHT, "delta_mask": 1.0},
    "tgrpo": {"accuracy": 1.0, "format": 1.0, "temporal": 1.0},
    "sfgrpo": {"accuracy": 1.0, "format": 1.0, "consistency": 1.0},
    "prr": {"accuracy": 1.0, "format": 1.0, "process": 1.0},
    "processthinker": {"accuracy": 0.0, "format": 0.0, "process_thinker": 1.0},
}
PRESET_GATES: dict[str, float] = {"dmgrpo": FORMAT_GATE}  # the gated components (`gated_by`) count from this value of their gate on
PRESET_SOURCES: dict[str, str] = {
    "default": "Video-R1",
    "csgrpo": "Open-o3-Video-v2 (003)",
    "dmgrpo": "VideoMend eq. 2 (002)",
    "tgrpo": "Video-R1 T-GRPO",
    "sfgrpo": "VideoMend §8.2 (002)",
    "prr": "MOSS-ChatV eq. 13 (000)",
    "processthinker": "ProcessThinker eq. 6 (004)",
}
DEFAULT_PRESET = "csgrpo"  # RewardConfig(), the env, `videoseek rollout`, play mode

GROUP_NAMES = {"mask": "a masked group", "shuffle": "a frame-shuffled group", "blend": "an α-blended group"}


def _number(value: float) -> str:
    return f"{value:g}"


def preset_needs(weights: dict[str, float]) -> list[str]:
    """What the driver plays beside the origin group for these weights (perturbed groups, continuations)."""
    counted = [REWARD_COMPONENTS[name] for name, w in weights.items() if w != 0]
    kinds = list(dict.fromkeys(c.group_kind for c in counted if c.group_kind))
    needs = [GROUP_NAMES.get(kind, f"a {kind!r} group") for kind in kinds]
    if any(c.needs_continuations for c in counted):
        needs.append("continuations of each step prefix")
    return needs


def preset_table() -> str:
    """The markdown table of the presets (what `make docs` writes into the README and the docs).

    >>> print(preset_table().splitlines()[2])
    | `default` | Video-R1 | accuracy 1, format 1 | — | — |
    """
    lines = [
        "| preset | seed | components (weight) | the driver also plays | what the other components reward |",
        "|---|---|---|---|---|",
    ]
    for name, weights in PRESETS.items():
        counted = [f"{c} {_number(w)}" for c, w in weights.items() if w != 0]
        reported = [c for c, w in weights.items() if w == 0]
        parts = ", ".join(counted)
        gate = PRESET_GATES.get(name)
        gated = [c for c in weights if REWARD_COMPONENTS[c].gated_by]
        if gate is not None and gated:
            openers = ", ".join(dict.fromkeys(REWARD_COMPONENTS[c].gated_by or "" for c in gated))
            parts += f"; {', '.join(gated)} gated by {openers} ≥ {_number(gate)}"
        if reported:
            parts += f" ({', '.join(reported)} reported at 0)"
        others = [f"{c}: {REWARD_COMPONENTS[c].summary}" for c, w in weights.items() if w != 0 and not REWARD_COMPONENTS[c].reported]
        needs = preset_needs(weights)
        cells = [f"`{name}`" + (" (default)" if name == DEFAULT_PRESET else ""), PRESET_SOURCES.get(name, ""), parts, ", ".join(needs) or "—", "; ".join(others) or "—"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def preset_help() -> str:
    """One line naming each preset and its counted components (the `--reward` help)."""
    return ", ".join(f"{name} ({', '.join(c for c, w in weights.items() if w != 0)})" for name, weights in PRESETS.items())
