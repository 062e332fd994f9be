"""The reward of a TRL rollout is the VideoSeek env's reward for its episode.

TRL calls each reward function with the parsed completions and, with an `environment_factory`,
the rollouts' environment instances (`environments=`). The final answer reaches the env here:
`videoseek_reward` steps each episode with the rollout's last assistant turn and returns the
env's reward (its preset's weighted components); the components, accuracy and the tool-use
numbers every path reports (`videoseek.envs.metrics.mean_metrics` of the episodes' trajectories:
`calls`, `calls/<tool>` and `tool_rate/<tool>` for each configured tool, `crop_rate`,
`invalid_calls`, `valid_format`, `turns`, `tokens`, which is 0 here: the env does not see TRL's
token ids) are logged through TRL's `log_metric` as `videoseek/<name>` (means over the batch).

TRL's response parser moves `<think>` into `reasoning_content`; the turn is given back to the
env as `<think>reasoning</think>content` (whitespace between them is not kept), so the format and
thinking rewards see the think block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from videoseek.envs.metrics import facts_of_trajectory, mean_metrics


def final_turn_text(completion: Sequence[dict[str, Any]] | str) -> str | None:
    """The last assistant turn of a TRL completion as the model wrote it; None when it is a tool
    call that TRL did not run (its tool loop stopped) and "" for an empty completion."""
    if isinstance(completion, str):
        return completion
    turns = [m for m in completion if m.get("role") == "assistant"]
    if not turns:
        return ""
    last = turns[-1]
    if last.get("tool_calls") and completion[-1] is last:
        return None
    content = last.get("content") or ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if part.get("type") == "text")
    reasoning = last.get("reasoning_content")
    return f"<think>{reasoning}</think>{content}" if reasoning else content


def videoseek_reward(completions: list, environments: list, log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float]:
    """The env's reward for each rollout (see the module docstring)."""
    if environments is None:
        raise ValueError("videoseek_reward needs GRPOTrainer(environment_factory=videoseek.integrations.trl.environment_factory(...))")
    results = [env._finish(final_turn_text(c)) for c, env in zip(completions, environments, strict=True)]
    if log_metric is not None and results:
        trajs = [env.env.trajectory for env in environments]
        tools = list(dict.fromkeys(name for env in environments for name in env.env.tools))  # configured, in order: unused ones log 0
        # accuracy is recorded whether the preset weighs it or not; the components may hold it too
        metrics = {"accuracy": float(np.mean([t.accuracy or 0.0 for t in trajs])),
                   **mean_metrics([facts_of_trajectory(t) for t in trajs], tools)}  # fmt: skip
        for name in sorted({k for _, comps in results for k in comps}):
            metrics[name] = float(np.mean([comps.get(name, 0.0) for _, comps in results]))
        for name, value in metrics.items():
            log_metric(f"videoseek/{name}", float(value))
    return [total for total, _ in results]


reward_funcs = [videoseek_reward]
