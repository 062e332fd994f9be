"""The reward panel's explanation: each component's weight and gate, so the total is Σ weight × value.

The weights and gates are those of `videoseek.rewards.RewardConfig` (presets in
`rewards/presets.py`, each component's gate in its registration, `rewards/registry.py`), read from the run's record: the nearest `run.json` in the episode's folder
or up to two folders above it (a training step folder, `rollouts/`, the run), which every entry
point writes (`videoseek.agents.run_record`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from videoseek.viewer.runindex import as_float


def find_reward_config(folder: Path, levels: int = 2) -> tuple[Any, str, str | None]:
    """(RewardConfig or None, the run.json it came from or "", a problem text or None)."""
    from videoseek.agents.run_record import find_run_record, reward_config_of

    path, record, problem = find_run_record(folder, levels)
    if record is None:
        return None, str(path or ""), problem
    try:
        return reward_config_of(record), str(path), None
    except Exception as exc:  # noqa: BLE001 - pydantic ValidationError or a bad type
        lines = str(exc).splitlines() or [type(exc).__name__]
        return None, str(path), f"{path}: reward config not usable ({lines[1].strip() if len(lines) > 1 else lines[0]})"


def _gated_by(registry: dict[str, Any], name: str) -> str | None:
    component = registry.get(name)  # a run's component this process has not registered has no gate here
    return component.gated_by if component is not None else None


def reward_line(config: Any, source: str) -> dict[str, Any]:
    """A run's reward config as the training view shows it: preset, weights, the gate's threshold and
    each gated component with its opener (`RewardConfig.gates`), and the file it came from."""
    gate = config.gate()
    return {"preset": config.preset, "weights": config.merged_weights(), "gate": gate, "source": source,
            "gates": [{"component": name, "by": by, "threshold": gate} for name, by in config.gates().items()]}  # fmt: skip


def explain_reward(components: dict[str, float | None], reward: float | None, config: Any, source: str, problem: str | None = None) -> dict[str, Any]:
    """Per component its value, weight, weight × value and gate state; their sum and whether it is the recorded reward.

    A gated component (its registered `gated_by`: `timestamp`, `delta_mask` in dmgrpo) carries
    `gate`: the threshold, the component that opens it (`ref_delta_format`), its value and whether
    the gate was open; the opener carries `gates`, the components it gates. The value is the one
    the reward used (already zeroed by a closed gate).
    """
    from videoseek.rewards.compose import weighted_terms
    from videoseek.rewards.registry import REWARD_COMPONENTS

    if config is None:
        return {"known": False, "source": source, "problem": problem, "rows": [], "sum": None, "reward": reward, "matches": None}
    weights = config.merged_weights()
    gate = config.gate()
    names = list(components) + [k for k in weights if k not in components and weights[k] != 0]
    # The terms and their sum are compose's own (`weighted_terms`): the panel never re-derives the reward.
    terms = weighted_terms({k: v for k, v in components.items() if v is not None}, config)
    total = sum(terms.values())
    rows = []
    for name in names:
        value = components.get(name)
        weight = float(weights.get(name, 0.0))
        present = name in components and value is not None
        contribution = terms.get(name, 0.0) if present else None
        row: dict[str, Any] = {"name": name, "value": value, "weight": weight, "contribution": contribution, "present": present, "gate": None}
        opener = _gated_by(REWARD_COMPONENTS, name)
        if gate is not None and opener:
            gate_value = as_float(components.get(opener))
            row["gate"] = {"threshold": gate, "by": opener, "value": gate_value,
                           "open": None if gate_value is None else gate_value >= gate}  # fmt: skip
        gated = [g for g in names if _gated_by(REWARD_COMPONENTS, g) == name]
        if gate is not None and gated:
            row["gates"] = gated
        rows.append(row)
    matches = None if reward is None else abs(total - reward) <= 1e-6 * max(1.0, abs(reward))
    return {"known": True, "preset": config.preset, "source": source, "problem": None, "gate": gate, "rows": rows, "sum": total, "reward": reward, "matches": matches}
