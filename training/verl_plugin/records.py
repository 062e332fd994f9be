"""What crosses process boundaries in verl: the sample in a parquet row, the episode in `extra_fields`.

verl moves per-sample data between Ray workers as numpy object arrays (and, in the v1 trainer,
through TransferQueue), so everything here is plain JSON-able Python.

- The parquet row's `extra_info["sample"]` holds the `VideoSample` as a JSON *string*: pyarrow
  would otherwise store nested dicts as structs whose keys are unified across rows, turning
  `key_frames[*].boxes` (object names differ per sample) into dicts padded with nulls.
- `VideoSeekAgentLoop` puts one dict under `extra_fields["videoseek"]` (the `EXTRA_KEY`); verl's
  reward manager merges `extra_fields` into the `extra_info` that `compute_score` receives.
- On verl's stock `ToolAgentLoop`, the `VideoSeekTool` adapters keep the episode's accepted calls
  under `extra_fields["videoseek_tool"]` (the `TOOL_KEY`, `new_tool_record`), shaped as the
  `EpisodeSummary` fields the rewards read, so `compute_score` scores it as the env would.
- Both records count the accepted calls of each tool (`tool_calls`: name -> count); the agent
  loop's record names the env's tools (`tools`), and rows from `export-verl` the tools they were
  exported for (`extra_info["tools"]`), so the reward extras hold one `calls/<tool>` key per
  configured tool whether or not an episode called it.
- The reward extras' tool-use numbers are `videoseek.envs.metrics`'s, from each record's
  `EpisodeFacts`: the agent loop has the env's `Trajectory` and puts its facts in the record
  (`loop_call_fields`, read back by `record_facts`); on the `ToolAgentLoop` they are made from the
  adapters' record and the decoded turns (`tool_record_facts`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from videoseek.envs.metrics import EpisodeFacts, facts_of_trajectory, facts_of_turns
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards import EpisodeSummary

EXTRA_KEY = "videoseek"
VIEW_KEY = "videoseek_episode"  # compute_score's JSON string of the sample and record, for the viewer (verl's dumps)
AGENT_NAME = "videoseek"
TOOL_AGENT_NAME = "tool_agent"  # verl's stock ToolAgentLoop, with one VideoSeekTool adapter per tool
TOOL_KEY = "videoseek_tool"  # the adapters' record in the loop's extra_fields (`new_tool_record`)
TOOLS_KEY = "tools"  # extra_info["tools"]: the names of the tools the rows were exported for (`export-verl --tools`)


def new_tool_record() -> dict[str, Any]:
    """The `TOOL_KEY` record of an episode on verl's `ToolAgentLoop` before its first call.

    `calls`: the time spans of accepted span-retrieving calls, `call_frames`: the times of the frames
    each of them returned, `zooms`: (time, box) of accepted looks at a region (as `EpisodeSummary`'s
    fields of these names); `tool_calls`: accepted calls per tool;
    `invalid_calls`: rejected calls; `frames`: frames the calls returned (the episode's budget).
    """
    return {"calls": [], "call_frames": [], "zooms": [], "tool_calls": {}, "invalid_calls": 0, "frames": 0}


def loop_call_fields(trajectory: Trajectory | None, tools: list[str]) -> dict[str, Any]:
    """The part of `VideoSeekAgentLoop`'s record that its episode's `Trajectory` gives: the accepted
    calls per tool (`tool_calls`), the env's tool names (`tools`) and the episode's `EpisodeFacts`
    (`facts`, as plain data: what the reward extras' tool-use numbers are made from)."""
    facts = facts_of_trajectory(trajectory) if trajectory is not None else EpisodeFacts(failed=True)
    return {"tool_calls": dict(facts.calls), "tools": list(tools), "facts": facts.to_dict()}


def record_facts(record: dict[str, Any]) -> EpisodeFacts:
    """The `EpisodeFacts` in a `VideoSeekAgentLoop` record (`loop_call_fields`); DataError naming the field without them."""
    if not isinstance(record.get("facts"), dict):
        raise DataError("extra_info.videoseek.facts: missing (a record from another version of VideoSeekAgentLoop)")
    return EpisodeFacts.from_dict(record["facts"])


def tool_record_facts(tool_record: dict[str, Any] | None, assistant_turns: list[str], tools: list[str]) -> EpisodeFacts:
    """The `EpisodeFacts` of an episode on verl's stock `ToolAgentLoop` (or of a row with no record at
    all): the calls the `VideoSeekTool` adapters accepted and refused (`new_tool_record`), and the
    decoded assistant turns read with the env's parser (`envs.metrics.facts_of_turns`).

    verl's Hermes parser, not the env's, decided which calls ran: a repaired or malformed turn is
    one the env's parser would have repaired or could not read, and the calls verl answered itself
    (an unknown tool, arguments that are not JSON: no adapter saw them) count as invalid calls as
    the env would count them, besides the calls the adapters refused. Tokens are not counted here (0).
    """
    record = tool_record or {}
    accepted = {str(k): int(v) for k, v in (record.get("tool_calls") or {}).items()}
    return facts_of_turns(assistant_turns, accepted, int(record.get("invalid_calls") or 0), tools)


def sample_to_json(sample: VideoSample) -> str:
    """The sample as one JSON string (absolute video path, as the env in a worker needs)."""
    return json.dumps(sample.to_json_row(), ensure_ascii=False)


def sample_from_extra_info(extra_info: dict[str, Any] | None) -> VideoSample:
    """The `VideoSample` stored in a row's `extra_info["sample"]`; DataError naming the field if absent or bad."""
    if not extra_info or "sample" not in extra_info or extra_info["sample"] is None:
        raise DataError("extra_info.sample: missing (rows must come from `videoseek export-verl`)")
    raw = extra_info["sample"]
    try:
        row = json.loads(raw) if isinstance(raw, str) else dict(raw)
        return VideoSample.model_validate(row)
    except (ValueError, TypeError) as exc:
        first = str(exc).splitlines()[0]
        raise DataError(f"extra_info.sample: not a valid VideoSample ({first})") from None


def episode_view(sample: VideoSample, record: dict[str, Any] | None) -> str:
    """The sample and the agent loop's record as one JSON string (`VIEW_KEY`): what verl's rollout
    dumps (and the agent loop's own, `episode_dump.py`) carry to the viewer."""
    return json.dumps({"sample": sample.to_json_row(), "record": record}, ensure_ascii=False)


def summary_to_dict(summary: EpisodeSummary) -> dict[str, Any]:
    """An `EpisodeSummary` as plain data (calls as [start, end] lists, zooms as [time, [x1, y1, x2, y2]])."""
    d = asdict(summary)
    d["calls"] = [[float(s), float(e)] for s, e in summary.calls]
    d["zooms"] = zooms_to_list(summary.zooms)
    d["call_frames"] = frames_to_list(summary.call_frames)
    return d


def frames_to_list(call_frames: Any) -> list[list[float] | None]:
    return [None if ts is None else [float(t) for t in ts] for ts in call_frames or []]


def frames_from_list(call_frames: Any) -> list[tuple[float, ...] | None]:
    return [None if ts is None else tuple(float(t) for t in ts) for ts in call_frames or []]


def zooms_to_list(zooms: Any) -> list[list[Any]]:
    return [[float(t), [float(v) for v in box]] for t, box in zooms or []]


def summary_from_dict(d: dict[str, Any]) -> EpisodeSummary:
    """Inverse of `summary_to_dict`; unknown keys are ignored so older records still load."""
    return EpisodeSummary(
        prediction=d.get("prediction"),
        assistant_turns=[str(t) for t in d.get("assistant_turns") or []],
        calls=[(float(s), float(e)) for s, e in d.get("calls") or []],
        invalid_calls=int(d.get("invalid_calls") or 0),
        duration=float(d.get("duration") or 0.0),
        truncated=bool(d.get("truncated", False)),
        zooms=[(float(t), [float(v) for v in box]) for t, box in d.get("zooms") or []],
        call_frames=frames_from_list(d.get("call_frames")),
        metadata=dict(d.get("metadata") or {}),
    )
