"""Tool-use collapse: per-step tool-use numbers, and a one-time warning when the tool-call rate stays low.

Agentic RL can stop calling its tools: the rate of episodes with a tool call falls to zero while
the reward still looks fine (DeepEyes #55, #83). `tool_use_metrics` gives, over a step's origin
episodes, the tool-use numbers `videoseek eval`, verl's reward extras and the TRL logs report
(`videoseek.envs.metrics`, one definition): `crop_rate` (share of episodes with at least one
accepted call, whatever the tool; the key keeps its name from the one-tool days), `calls`
(accepted calls of any tool) and `calls/<tool>`, `tool_rate/<tool>` (share of episodes with an
accepted call of that tool), `invalid_calls`, `valid_format` (share whose every turn was one
unrepaired protocol action, ending with an answer, not truncated), `turns` and `tokens`.
`CollapseWatch` warns once when that rate stays below a threshold for N steps in a row.
`call_push` says which reward term drives the number of calls, before the rate shows it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from videoseek.envs.metrics import facts_of_trajectory, mean_metrics
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards.advantage import term_push

DEFAULT_THRESHOLD = 0.1
DEFAULT_STEPS = 5


def tool_use_metrics(trajectories: Sequence[Trajectory], tools: Sequence[str] = ()) -> dict[str, float]:
    """Means over the origin episodes that ran (failed ones are counted in `failures` elsewhere) of
    `envs.metrics.metrics_of`, with keys for the configured `tools` and any tool called; {} without any."""
    return mean_metrics([facts_of_trajectory(t) for t in trajectories if t.group.role == "origin" and t.failure is None], tools)


def call_push(trajectories: Sequence[Trajectory], weights: Mapping[str, float], norm_by_std: bool = True) -> dict[str, float]:
    """`push/calls/<term>`: per weighted reward term, sum_i A_i (calls_i - group mean) of its part of
    the advantages (`rewards.advantage.term_push`), summed over the step's groups and divided by its
    scored origin episodes. Negative: that term makes GRPO favour the episodes with fewer tool calls.

    Found with it (docs/training.md): with GRPO's std, clue-seek's small differences in groups that
    all answer right pushed the search down as hard as accuracy pushed it up; {} without episodes.
    """
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        if t.group.role == "origin" and t.failure is None and t.reward_components:
            groups[t.group.id].append(t)
    n = sum(len(g) for g in groups.values())
    if not n:
        return {}
    total = dict.fromkeys(weights, 0.0)
    for group in groups.values():
        calls = [float(sum(facts_of_trajectory(t).calls.values())) for t in group]  # accepted calls, as `calls` counts them
        push = term_push([t.reward_components for t in group], weights, calls, norm_by_std=norm_by_std)
        for k, v in push.items():
            total[k] += v
    return {f"push/calls/{k}": v / n for k, v in total.items()}


class CollapseWatch:
    """Counts consecutive steps with `crop_rate < threshold`; `update` returns a warning the first time
    the count reaches `steps`, and None otherwise (also for every later step: it warns once per run).

    `tools`: the names of the env's tools, which the warning names (none given: "a tool").
    """

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, steps: int = DEFAULT_STEPS, tools: Sequence[str] = ()) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"collapse threshold must be in [0, 1], got {threshold}")
        if steps < 1:
            raise ValueError(f"collapse steps must be at least 1, got {steps}")
        self.threshold, self.steps = threshold, steps
        self.tools = list(tools)
        self.run = 0
        self.warned = False

    def update(self, step: int, crop_rate: float | None) -> str | None:
        """Feed one step's tool-call rate (None: no episode ran, which neither counts nor breaks the run)."""
        if crop_rate is None:
            return None
        self.run = self.run + 1 if crop_rate < self.threshold else 0
        if self.warned or self.run < self.steps:
            return None
        self.warned = True
        tools = " or ".join(self.tools) if self.tools else "a tool"
        return (f"tool use is collapsing: tool-call rate below {self.threshold:g} for {self.steps} steps in a row "
                f"(steps {step - self.steps + 1}-{step}, now {crop_rate:.3g}); the policy answers without calling {tools}")  # fmt: skip
