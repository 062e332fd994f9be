"""Group coordination inside one verl agent-loop worker: perturbed groups and group rewards.

verl's v1 trainer (the default) runs the G rollouts of one prompt as G concurrent
`AgentLoopBase.run` coroutines in one worker process: `AgentLoopWorkerTQ._run_prompt` spawns all
`rollout.n` sessions of a `uid` together. (verl's legacy trainer does not: it splits the repeated
batch into equal chunks across workers, which can split a group, so `config.validate`
refuses it for the group presets.) The group rewards of the seeds need the whole group:

- DM-GRPO (VideoMend §5.2–5.4, seed 002): the masked group (G~ rollouts on the masked video)
  gives p~, shared by every origin rollout of the sample; the mask pattern is drawn once per group.
- T-GRPO (Video-R1, VideoMend baseline): the shuffled group's accuracy against the origin group's.
- ProcessThinker (seed 004) scores each trajectory from its own continuations (no group wait).

Design choice (see docs/training.md): the agent loop generates the perturbed rollouts itself
through verl's server manager and returns only the origin trajectories, so the batch verl trains
on holds exactly the origin group and GRPO's advantages are normalised within it, as VideoMend
specifies ("advantages within the origin group"). verl never sees the perturbed rollouts.

How a group is known without knowing G: every session `join`s its group synchronously as the
first thing `run` does. All sessions of a uid are scheduled together, so all of them have joined
before any can finish (finishing takes many awaits); a group is complete when every session that
joined has reported or left (a crashed session leaves in a `finally`). The perturbed group is
started one event-loop tick after the first join, once all siblings have joined, so its default
size is the origin group's size (G~ = G, as in VideoMend).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from videoseek.agents.groups import Scores
from videoseek.rewards import EpisodeSummary



@dataclass
class GroupState:
    """The live state of one group (one uid in one worker)."""

    key: str
    joined: set[Any] = field(default_factory=set)
    order: list[Any] = field(default_factory=list)  # sessions in join order: an episode's index in its group
    left: set[Any] = field(default_factory=set)
    origins: dict[Any, EpisodeSummary] = field(default_factory=dict)
    perturbed_task: asyncio.Task | None = None
    score_fn: Callable[[list[EpisodeSummary]], Awaitable[Scores]] | None = None
    scoring: asyncio.Task | None = None
    scores: dict[Any, tuple[float, dict[str, float]]] = field(default_factory=dict)
    error: BaseException | None = None
    complete: asyncio.Event = field(default_factory=asyncio.Event)
    collected: set[Any] = field(default_factory=set)

    def is_complete(self) -> bool:
        return self.joined <= (set(self.origins) | self.left)


class GroupCoordinator:
    """Per-process registry of live groups; a group is dropped once every session has its result."""

    def __init__(self, max_groups: int = 65536) -> None:
        self.max_groups = max_groups
        self._groups: OrderedDict[str, GroupState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._groups)

    def join(self, key: str, session: Any) -> GroupState:
        """Register `session` in group `key` (synchronous: call before the first await)."""
        group = self._groups.get(key)
        if group is None:
            group = GroupState(key)
            self._groups[key] = group
            while len(self._groups) > self.max_groups:  # a leak guard; live groups never get here
                self._groups.popitem(last=False)
        if session not in group.joined:
            group.order.append(session)
        group.joined.add(session)
        return group

    def start_perturbed(self, group: GroupState, make: Callable[[int], Awaitable[Any]]) -> asyncio.Task:
        """Start the perturbed group once per group; `make(origin_group_size)` runs it."""
        if group.perturbed_task is None:

            async def after_all_joined() -> Any:
                await asyncio.sleep(0)  # let the sibling sessions scheduled with this one join first
                return await make(len(group.joined))

            group.perturbed_task = asyncio.ensure_future(after_all_joined())
        return group.perturbed_task

    def leave(self, group: GroupState, session: Any) -> None:
        """A session that will not report (it crashed): the others stop waiting for it."""
        group.left.add(session)
        self._maybe_score(group)
        self._maybe_drop(group)

    async def reward(
        self,
        group: GroupState,
        session: Any,
        summary: EpisodeSummary,
        score: Callable[[list[EpisodeSummary]], Awaitable[Scores]],
    ) -> tuple[float, dict[str, float]]:
        """Report this session's episode and wait for the group.

        Once every joined session has reported or left, `score(origins)` runs once (origins in
        session order) and each session gets its own (total, components).
        """
        group.origins[session] = summary
        group.score_fn = score
        self._maybe_score(group)
        await group.complete.wait()
        group.collected.add(session)
        self._maybe_drop(group)
        if group.error is not None:
            raise group.error
        return group.scores[session]

    def _maybe_score(self, group: GroupState) -> None:
        if group.is_complete() and group.origins and group.scoring is None and group.score_fn is not None:
            group.scoring = asyncio.ensure_future(self._score(group))

    async def _score(self, group: GroupState) -> None:
        sessions = sorted(group.origins, key=_order)
        try:
            results = await group.score_fn([group.origins[s] for s in sessions])
            group.scores.update(zip(sessions, results))
        except Exception as exc:  # noqa: BLE001 - reported to every waiting session, which re-raises it
            group.error = exc
        finally:
            group.complete.set()

    def _maybe_drop(self, group: GroupState) -> None:
        if group.joined <= (group.collected | group.left) and self._groups.get(group.key) is group:
            del self._groups[group.key]
            if group.perturbed_task is not None and not group.perturbed_task.done():
                group.perturbed_task.cancel()  # every origin session failed: nobody needs it


def _order(session: Any) -> tuple[int, Any]:
    return (0, session) if isinstance(session, int) else (1, str(session))


# ---- the per-step tool-use aggregate and the collapse warning, verl side ------------------------
class StepToolUse:
    """Per training step, the tool-use numbers of the episodes this worker process played, and the
    collapse warning the local backend prints (`local_backend.collapse.CollapseWatch`).

    verl's v1 trainer reduces no custom per-episode value to a step metric (its `reward_extra_info`
    reaches the rollout dumps, not the step's metrics), and adding one would mean changing its
    trainer. The agent loop is where every episode passes, with its step (`global_steps`): it
    reports each episode's `EpisodeFacts` here (`add`), and a step is complete when an episode of a
    later step arrives (the synchronous v1 trainer plays step N+1 only after training on step N).
    A complete step gives one row, `{"step", "episodes", **envs.metrics.mean_metrics}` (the keys the
    local backend's metrics.jsonl has: calls, calls/<tool>, crop_rate, tool_rate/<tool>,
    invalid_calls, valid_format, turns, tokens), logged on the worker's logger, appended to `sink`
    (a JSONL file: rollout_data_dir/videoseek_tool_use.<pid>.jsonl, beside verl's dumps), and
    fed to the collapse watch, whose warning is logged once. With several agent-loop workers each
    aggregates its own share of the step's episodes (verl spreads prompts evenly over them).
    The last step is never followed by a later one: `flush()` writes what is pending.
    """

    def __init__(self, tools: list[str], threshold: float = 0.1, steps: int = 5, sink: Any = None, log: Any = None) -> None:
        from videoseek.training.local_backend.collapse import CollapseWatch

        self.tools = list(tools)
        self.watch = CollapseWatch(threshold, steps, tools=self.tools)
        self.sink = sink
        self.log = log
        self.pending: dict[int, list[Any]] = {}
        self.rows: list[dict[str, Any]] = []
        self.warnings: list[str] = []

    def add(self, step: int, facts: Any) -> list[dict[str, Any]]:
        """Count one episode of `step`; returns the rows of the earlier steps this completes."""
        done = [self._row(s) for s in sorted(k for k in self.pending if k < step)]
        self.pending.setdefault(int(step), []).append(facts)
        return done

    def flush(self) -> list[dict[str, Any]]:
        """The rows of every pending step (the run ended)."""
        return [self._row(s) for s in sorted(self.pending)]

    def _row(self, step: int) -> dict[str, Any]:
        import json
        from pathlib import Path

        from videoseek.envs.metrics import mean_metrics

        facts = self.pending.pop(step)
        row = {"step": step, "episodes": len(facts), **mean_metrics(facts, self.tools)}
        self.rows.append(row)
        if self.log is not None:
            self.log.info("videoseek tool use, step %d: %s", step, " ".join(f"{k}={v:.4g}" for k, v in row.items() if k != "step"))
        if self.sink is not None:
            path = Path(self.sink)
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
        warning = self.watch.update(step, row.get("crop_rate"))
        if warning:
            self.warnings.append(warning)
            if self.log is not None:
                self.log.warning("videoseek: %s", warning)
        return row
