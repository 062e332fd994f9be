"""The per-episode tool-use numbers, defined once for every path that reports them.

`videoseek eval`, the local GRPO step metrics and collapse watch
(`training/local_backend/collapse.py`), verl's reward extras (`training/verl_plugin/reward_fn.py`),
the TRL reward's logs (`integrations/trl/rewards.py`) and the viewer all compute these numbers
here, so a local learning curve, a verl one and an evaluation can be compared key for key.

An episode is first reduced to its `EpisodeFacts` (what happened: accepted calls per tool, invalid
calls, malformed and repaired turns, answered, truncated, failed, turns, tokens), by a
constructor for each record that holds one: `facts_of_trajectory` (the env's `Trajectory`, which
the rollout runner, `VideoSeekAgentLoop` and the TRL env keep), `facts_of_json` (a trajectory
line as parsed JSON, any schema version, never raising: the viewer's index) and `facts_of_turns`
(assistant turns whose calls another parser ran: verl's stock `ToolAgentLoop`,
`training/verl_plugin/records.py`). `metrics_of` turns facts into the numbers, and `mean_metrics`
averages them over episodes:

- `calls`: accepted calls of any tool; `calls/<tool>`: of each tool (the configured tools first,
  0 for one never called, then any other tool an episode called);
- `crop_rate`: 1 when the episode made at least one *accepted* call of any tool (the key keeps
  its name from the one-tool days; `make learn` and the collapse watch read it); `tool_rate/<tool>`:
  1 when it made an accepted call of that tool. A call the env refused does not count: it returned
  nothing to look at;
- `invalid_calls`: malformed calls and calls the env refused (both cost a turn);
- `valid_format`: 1 when every turn parsed as exactly one protocol action (a think, a tool call or
  an answer) without the parser repairing anything, the episode ended with an answer, was not
  truncated and did not fail. A refused call is a well-formed call with a wrong value: it counts
  as an invalid call, not as a format error;
- `turns`: assistant turns; `tokens`: the tokens the policy generated (0 where the driver does
  not count them: scripted policies, TRL, verl's `ToolAgentLoop`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from videoseek.envs.actions import Answer, CropVideo, Invalid, ToolCall, parse_action
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards.accuracy import extract_choice


@dataclass(frozen=True)
class EpisodeFacts:
    """What one episode did, as far as the tool-use metrics care (see the module docstring)."""

    calls: dict[str, int] = field(default_factory=dict)  # accepted calls per tool name
    invalid_calls: int = 0  # malformed calls and calls the env refused
    malformed_turns: int = 0  # turns the parser could not read as an action (an `Invalid` action)
    repaired_turns: int = 0  # turns the parser read only after repairing them (`Turn.repairs`)
    answered: bool = False  # the episode ended with an answer
    truncated: bool = False  # ended by a budget (turns, frames, response length) rather than an answer
    failed: bool = False  # a crash inside the episode (`Trajectory.failure`)
    turns: int = 0  # assistant turns
    tokens: int = 0  # generated tokens (0 where the driver does not count them)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (what `VideoSeekAgentLoop` puts in its record)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeFacts:
        """Inverse of `to_dict`; unknown keys are ignored."""
        return cls(
            calls={str(k): int(v) for k, v in dict(data.get("calls") or {}).items()},
            invalid_calls=int(data.get("invalid_calls") or 0),
            malformed_turns=int(data.get("malformed_turns") or 0),
            repaired_turns=int(data.get("repaired_turns") or 0),
            answered=bool(data.get("answered", False)),
            truncated=bool(data.get("truncated", False)),
            failed=bool(data.get("failed", False)),
            turns=int(data.get("turns") or 0),
            tokens=int(data.get("tokens") or 0),
        )


class TurnFacts(NamedTuple):
    """One assistant turn as the metrics read it."""

    kind: str  # the action's type: "think", "tool_call", "answer" or "invalid"
    accepted_tool: str | None  # the tool of an accepted call; None otherwise
    error: bool  # the env answered the turn with an error (a refused call, a malformed one)
    repaired: bool  # the parser repaired the turn
    tokens: int = 0  # tokens generated for the turn


def facts_from(turns: Iterable[TurnFacts], truncated: bool, failed: bool) -> EpisodeFacts:
    """The episode's facts from its turns: the one place that says what counts as what."""
    calls: dict[str, int] = {}
    invalid = malformed = repaired = tokens = n = 0
    answered = False
    for turn in turns:
        n += 1
        tokens += turn.tokens
        repaired += turn.repaired
        if turn.accepted_tool is not None:
            calls[turn.accepted_tool] = calls.get(turn.accepted_tool, 0) + 1
        if turn.kind == "invalid":
            malformed += 1
            invalid += 1
        elif turn.kind == "tool_call" and turn.error:  # refused (an accepted call has no error)
            invalid += 1
        elif turn.kind == "answer":
            answered = True
    return EpisodeFacts(calls=calls, invalid_calls=invalid, malformed_turns=malformed, repaired_turns=repaired, answered=answered,
                        truncated=bool(truncated), failed=bool(failed), turns=n, tokens=tokens)  # fmt: skip


def facts_of_trajectory(traj: Trajectory) -> EpisodeFacts:
    """The facts of an env `Trajectory` (any path that keeps one: `run_rollouts`, `VideoSeekAgentLoop`, TRL)."""
    turns = (
        TurnFacts(
            kind=str(t.action.get("type")),
            accepted_tool=t.call.tool if t.call is not None else None,
            error=bool(t.error),
            repaired=bool(t.repairs),
            tokens=int((t.tokens or {}).get("completion", 0) or 0),
        )
        for t in traj.turns
    )
    return facts_from(turns, truncated=traj.truncated, failed=traj.failure is not None)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else 0


def facts_of_json(raw: Any) -> EpisodeFacts:
    """The facts of one trajectory line as parsed JSON (schema 1 or 2, or something else entirely);
    never raises: a field that is missing or of the wrong type counts as absent (the viewer's index
    reads untrusted files this way)."""
    raw = raw if isinstance(raw, Mapping) else {}
    turns_raw = raw.get("turns")

    def turn_facts(turn: Any) -> TurnFacts:
        turn = turn if isinstance(turn, Mapping) else {}
        action = turn.get("action") if isinstance(turn.get("action"), Mapping) else {}
        kind = action.get("type")
        kind = "tool_call" if kind == "crop_video" else str(kind)  # schema 1: a crop was its own action type
        call = turn.get("call")
        tool = None
        if isinstance(call, Mapping):
            tool = call.get("tool", "crop_video")  # schema 1 calls were crops
            tool = tool if isinstance(tool, str) else str(tool)
        tokens = turn.get("tokens") if isinstance(turn.get("tokens"), Mapping) else {}
        repairs = turn.get("repairs")
        return TurnFacts(kind, tool, bool(turn.get("error")), bool(repairs) if isinstance(repairs, list) else False, _int(tokens.get("completion")))

    turns = [turn_facts(t) for t in turns_raw] if isinstance(turns_raw, list) else []
    return facts_from(turns, truncated=raw.get("truncated") is True, failed=raw.get("failure") not in (None, ""))


def facts_of_turns(assistant_turns: Sequence[str], accepted: Mapping[str, int], refused: int, tools: Sequence[str],
                   truncated: bool = False, failed: bool = False) -> EpisodeFacts:  # fmt: skip
    """The facts of an episode whose calls another driver's parser ran (verl's `ToolAgentLoop`):
    the calls its tools accepted (`accepted`: per tool) and refused (`refused`), and its turns as
    text, each read after the fact with the env's parser (`envs.actions.parse_action`).

    So a malformed or repaired turn here is one the env's parser would have had to repair or could
    not read, whatever the other parser made of it; a turn that calls a tool outside `tools`, or
    that the env's parser cannot read, is an invalid call (the env would have refused it; verl
    answers it itself without any tool seeing it), besides the `refused` ones.
    """
    malformed = repaired = unknown = 0
    answered = False
    for text in assistant_turns:
        parsed = parse_action(text)
        repaired += bool(parsed.repairs)
        if isinstance(parsed.action, Invalid):
            malformed += 1
        elif isinstance(parsed.action, (ToolCall, CropVideo)) and parsed.action.name not in tools:
            unknown += 1
        elif isinstance(parsed.action, Answer):
            answered = True
    return EpisodeFacts(calls={str(k): int(v) for k, v in accepted.items() if int(v)}, invalid_calls=int(refused) + malformed + unknown,
                        malformed_turns=malformed, repaired_turns=repaired, answered=answered, truncated=bool(truncated),
                        failed=bool(failed), turns=len(assistant_turns), tokens=0)  # fmt: skip


def valid_format(facts: EpisodeFacts) -> bool:
    """Every turn one unrepaired protocol action, ending with an answer, not truncated, no failure."""
    return facts.turns > 0 and facts.answered and not (facts.malformed_turns or facts.repaired_turns or facts.truncated or facts.failed)


def reported_tools(facts: Iterable[EpisodeFacts], tools: Sequence[str] = ()) -> list[str]:
    """The tools whose keys the metrics of these episodes have: the configured `tools`, then any
    other tool called, in name order."""
    called = sorted({name for f in facts for name in f.calls} - set(tools))
    return list(dict.fromkeys([*tools, *called]))


def metrics_of(facts: EpisodeFacts, tools: Sequence[str] = ()) -> dict[str, float]:
    """One episode's numbers (see the module docstring); `tools`: the configured tools' names, each
    given `calls/<tool>` and `tool_rate/<tool>` keys whether called or not (verl stacks the reward
    extras across a batch, so every episode of a run must have the same keys)."""
    names = reported_tools([facts], tools)
    calls = float(sum(facts.calls.values()))
    return {
        "calls": calls,
        **{f"calls/{name}": float(facts.calls.get(name, 0)) for name in names},
        "crop_rate": float(calls > 0),
        **{f"tool_rate/{name}": float(facts.calls.get(name, 0) > 0) for name in names},
        "invalid_calls": float(facts.invalid_calls),
        "valid_format": float(valid_format(facts)),
        "turns": float(facts.turns),
        "tokens": float(facts.tokens),
    }


def mean_metrics(facts: Sequence[EpisodeFacts], tools: Sequence[str] = ()) -> dict[str, float]:
    """The mean of `metrics_of` over episodes ({} without any); every episode has the keys of the
    configured tools and of every tool any of them called (0 where it did not)."""
    if not facts:
        return {}
    names = reported_tools(facts, tools)
    per = [metrics_of(f, names) for f in facts]
    return {key: sum(m[key] for m in per) / len(per) for key in per[0]}


def invalid_call_rate(facts: Sequence[EpisodeFacts]) -> float:
    """Invalid calls over all calls (accepted and invalid) of the episodes; 0.0 without any call."""
    invalid = sum(f.invalid_calls for f in facts)
    total = invalid + sum(sum(f.calls.values()) for f in facts)
    return invalid / total if total else 0.0


# ---- the look-on decision (issue 37) --------------------------------------------------------------
LOOK_ON_TOOL = "crop_video"  # the span tool whose misses the decision follows


def look_on(traj: Trajectory, tool: str = LOOK_ON_TOOL) -> bool | None:
    """Did the episode look on after its first two accepted crops missed?

    The episode counts (True / False) when its sample has clue intervals, it made at least two
    accepted `tool` calls, the clue coverage after the second of them was 0 (both missed every
    clue) and a turn followed it; True when that next turn called `tool` again (accepted or not:
    the decision is the call), False when it did anything else (answered, thought, another tool).
    None for every other episode (no decision to look at: fewer than two crops, a crop that hit,
    an episode cut right after the second crop, a failed episode, a sample without clues).
    `make learn` reports the share of True among the counted held-out episodes (`look_on_rate`),
    the local GRPO step metrics the same over each step's episodes (`look_on`, `look_on_n`).
    """
    if traj.failure is not None or not traj.clue_intervals:
        return None
    accepted = [k for k, t in enumerate(traj.turns) if t.call is not None and t.call.tool == tool]
    if len(accepted) < 2:
        return None
    second = accepted[1]
    if float(traj.turns[second].evidence.get("coverage") or 0.0) > 0.0 or second + 1 >= len(traj.turns):
        return None
    return traj.turns[second + 1].tool_name == tool


def began_with_forced_start(traj: Trajectory) -> bool:
    """Did the episode begin with a forced start (its first turns written by it, not the policy:
    `agents.groups.look_on_start`, the look-on state or the first window)?"""
    return bool(traj.turns) and traj.turns[0].forced


def look_on_rate(trajectories: Iterable[Trajectory], tool: str = LOOK_ON_TOOL) -> dict[str, float]:
    """{"look_on": share of True among the counted episodes, "look_on_n": how many counted}
    (`look_on`); {"look_on_n": 0.0} when none counted (no rate: JSON has no NaN)."""
    counted = [v for v in (look_on(t, tool) for t in trajectories) if v is not None]
    if not counted:
        return {"look_on_n": 0.0}
    return {"look_on": sum(counted) / len(counted), "look_on_n": float(len(counted))}


# ---- search and reading apart: did a frame show the clue? ------------------------------------------
def clue_shown(traj: Trajectory) -> bool | None:
    """Did a frame the episode showed the policy lie in a clue interval (its initial frames and every
    observation's, masked frames excepted: they show nothing)? None for a failed episode or a sample
    without clue intervals. Accuracy where True is the policy's reading; the share of True, its search.

    A crop's interval can cover a clue its frames step over (4 frames over 7.5 s miss a 1 s flash),
    which is why this reads frame times, not the evidence state's span coverage.
    """
    if traj.failure is not None or not traj.clue_intervals:
        return None
    frames = [*traj.initial.frames, *(f for turn in traj.turns for f in turn.observation.frames)]
    return any(lo <= f.t <= hi for f in frames if not f.masked for lo, hi in traj.clue_intervals)


def shown_rate(trajectories: Iterable[Trajectory]) -> dict[str, float]:
    """{"shown": share of the counted episodes (`clue_shown` not None) whose clue a frame showed,
    "shown_n": how many counted, "accuracy_shown" / "accuracy_unshown": mean accuracy of each part}
    ({"shown_n": 0.0} when none counted; a part without episodes has no accuracy key).

    >>> shown_rate([])
    {'shown_n': 0.0}
    """
    parts: dict[bool, list[float]] = {True: [], False: []}
    for traj in trajectories:
        shown = clue_shown(traj)
        if shown is not None:
            parts[shown].append(float(traj.accuracy or 0.0))
    n = len(parts[True]) + len(parts[False])
    if not n:
        return {"shown_n": 0.0}
    out = {"shown": len(parts[True]) / n, "shown_n": float(n)}
    for shown, key in ((True, "accuracy_shown"), (False, "accuracy_unshown")):
        if parts[shown]:
            out[key] = sum(parts[shown]) / len(parts[shown])
    return out


def reading_by_answer(trajectories: Iterable[Trajectory]) -> dict[str, dict[str, Any]]:
    """The reading answer by answer: over the episodes whose clue a frame showed (`clue_shown`), for
    each right answer {"n", "accuracy", "predictions": {prediction: count}}, answers in order.

    `shown_rate`'s one reading number hides which options a reader confuses: in `make learn` (seed 1, SFT on 160 questions)
    SFT read four colours right where shown and purple in 6 of 19, answering blue otherwise; its GRPO
    answered blue for all 29 purple flashes. Multiple-choice episodes only (open-ended answers have
    no fixed options to confuse, and would make a row each). A prediction names its option as the
    accuracy scorer reads it (`rewards.accuracy.extract_choice`: "D", "(D)", "D. blue", "blue");
    one that names none counts as "other", a missing one as "none".

    >>> reading_by_answer([])
    {}
    """
    rows: dict[str, dict[str, Any]] = {}
    for traj in trajectories:
        if not traj.options or not clue_shown(traj):
            continue
        pred = (traj.prediction or "").strip()
        key = "none" if not pred else extract_choice(pred, traj.options) or "other"
        answer = extract_choice(traj.answer, traj.options) or traj.answer.strip().upper()  # as multiple_choice_accuracy
        row = rows.setdefault(answer, {"n": 0, "right": 0.0, "predictions": {}})
        row["n"] += 1
        row["right"] += float(traj.accuracy or 0.0)
        row["predictions"][key] = row["predictions"].get(key, 0) + 1
    return {answer: {"n": row["n"], "accuracy": row["right"] / row["n"], "predictions": dict(sorted(row["predictions"].items()))}
            for answer, row in sorted(rows.items())}
