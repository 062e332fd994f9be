"""The reward panel's explanation: each component's weight and gate, so the total is Σ weight × value.

The weights and gates are those of `videoseek.rewards.RewardConfig` (presets in
`rewards/compose.py`). The config of a run is found, nearest first, in each of the episode's
folder and up to two folders above it (a training step folder, `rollouts/`, the run):

- `grpo.json`'s `reward_config` (written by the local GRPO backend for each step);
- `run.json`'s `env.reward` (a config) or `reward` (a preset name) (`videoseek rollout`, the local backend);
- `agent_loop.yaml`'s `videoseek.reward` (the verl backend's agent-loop options).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from videoseek.viewer.runindex import as_dict, as_float


def _candidates(folder: Path) -> list[tuple[Path, Any]]:
    """(file, raw reward config or preset name) found in `folder`, in the order they are tried."""
    found: list[tuple[Path, Any]] = []
    grpo = folder / "grpo.json"
    if grpo.is_file():
        try:
            value = as_dict(json.loads(grpo.read_text(encoding="utf-8"))).get("reward_config")
            if value is not None:
                found.append((grpo, value))
        except (OSError, ValueError):
            found.append((grpo, ValueError("grpo.json is not valid JSON")))
    manifest = folder / "run.json"
    if manifest.is_file():
        try:
            data = as_dict(json.loads(manifest.read_text(encoding="utf-8")))
            value = as_dict(data.get("env")).get("reward", data.get("reward"))
            if value is not None:
                found.append((manifest, value))
        except (OSError, ValueError):
            found.append((manifest, ValueError("run.json is not valid JSON")))
    loop = folder / "agent_loop.yaml"
    if loop.is_file():
        try:
            import yaml

            entries = yaml.safe_load(loop.read_text(encoding="utf-8"))
            for entry in entries if isinstance(entries, list) else []:
                value = as_dict(as_dict(entry).get("videoseek")).get("reward")
                if value is not None:
                    found.append((loop, value))
                    break
        except Exception:  # noqa: BLE001 - a YAML error must not break the episode view
            found.append((loop, ValueError("agent_loop.yaml is not valid YAML")))
    return found


def find_reward_config(folder: Path, levels: int = 2) -> tuple[Any, str, str | None]:
    """(RewardConfig or None, the file it came from or "", a problem text or None)."""
    from videoseek.rewards import RewardConfig

    problem = None
    here = Path(folder)
    for _ in range(levels + 1):
        for path, value in _candidates(here):
            if isinstance(value, Exception):
                problem = problem or f"{path}: {value}"
                continue
            try:
                config = RewardConfig(preset=value) if isinstance(value, str) else RewardConfig.model_validate(value)
                return config, str(path), None
            except Exception as exc:  # noqa: BLE001 - pydantic ValidationError or a bad type
                first = (str(exc).splitlines() or [type(exc).__name__])
                problem = problem or f"{path}: reward config not usable ({first[1].strip() if len(first) > 1 else first[0]})"
        if here.parent == here:
            break
        here = here.parent
    return None, "", problem or "no reward config found (grpo.json, run.json or agent_loop.yaml beside the run)"


def explain_reward(components: dict[str, float | None], reward: float | None, config: Any, source: str, problem: str | None = None) -> dict[str, Any]:
    """Per component its value, weight, weight × value and gate state; their sum and whether it is the recorded reward.

    A gated component (`timestamp`, `delta_mask` in dmgrpo) carries `gate`: the threshold, the
    component that opens it (`ref_delta_format`), its value and whether the gate was open. Its
    value is the one the reward used (already zeroed by a closed gate).
    """
    from videoseek.rewards.compose import GATED, weighted_terms

    if config is None:
        return {"known": False, "source": source, "problem": problem, "rows": [], "sum": None, "reward": reward, "matches": None}
    weights = config.merged_weights()
    gate = config.gate()
    gate_value = as_float(components.get("ref_delta_format"))
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
        if gate is not None and name in GATED:
            row["gate"] = {"threshold": gate, "by": "ref_delta_format", "value": gate_value,
                           "open": None if gate_value is None else gate_value >= gate}  # fmt: skip
        if gate is not None and name == "ref_delta_format":
            row["gates"] = [g for g in GATED if g in names]
        rows.append(row)
    matches = None if reward is None else abs(total - reward) <= 1e-6 * max(1.0, abs(reward))
    return {"known": True, "preset": config.preset, "source": source, "problem": None, "gate": gate, "rows": rows, "sum": total, "reward": reward, "matches": matches}
