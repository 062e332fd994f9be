"""`compute_score` for verl's `reward.custom_reward_function` (path `pkg://videoseek.training.verl_plugin.reward_fn`).

verl's reward manager calls `compute_score(data_source, solution_str, ground_truth, extra_info)`
once per trajectory. `extra_info` is the parquet row's `extra_info` (with the sample) merged with
the `extra_fields` the agent loop returned (`extra_fields["videoseek"]`: the episode summary, the
evidence state, the reward preset, and, for group presets, the group reward already computed by
`videoseek.rewards.score_group` inside the agent loop). Rows played by verl's stock `ToolAgentLoop`
with the `VideoSeekTool` adapters carry the tools' calls instead (`extra_info["videoseek_tool"]`),
and the episode is read from the decoded response and those calls.

The score is `score_episode(sample, episode, RewardConfig(preset=...))`, the same function the
env calls at its terminal step, so the local backend, the env and verl score an episode
identically. For the group presets (DM-GRPO, T-GRPO, ProcessThinker) a single trajectory cannot
see its group, so the agent loop's group reward is used and `group_term` reports the part of it
that the group added.

The result is a dict: `score` plus a fixed set of keys per preset and tool list (verl stacks every
key across the batch, so all trajectories of a run must return the same keys), and
`videoseek_episode`: the sample and the agent loop's record as a JSON string, which verl's rollout
dumps carry to the viewer. The tool-use keys are `videoseek.envs.metrics.metrics_of`, the numbers
`videoseek eval`, the local backend's step metrics and collapse watch and the TRL logs report:
`calls` (accepted calls of any tool), `calls/<tool>` and `tool_rate/<tool>` (for each configured
tool: the agent loop's env tools, else the row's `extra_info["tools"]` from `export-verl`, else
the default tools), `crop_rate` (1 when the episode made an accepted call of any tool),
`invalid_calls`, `valid_format`, `turns` and `tokens`, from the agent loop's `EpisodeFacts`
(`records.record_facts`) or, on the `ToolAgentLoop`, the adapters' record and the decoded turns
(`records.tool_record_facts`, which says what a repair means there).
"""

from __future__ import annotations

import re
from typing import Any

from videoseek.rewards import (
    EpisodeSummary,
    RewardConfig,
    accuracy_reward,
    score_episode,
)
from videoseek.rewards.tags import last_block
from videoseek.envs.metrics import metrics_of
from videoseek.envs.tools import DEFAULT_TOOLS, tool_names
from videoseek.training.verl_plugin.records import (
    EXTRA_KEY,
    TOOL_KEY,
    TOOLS_KEY,
    VIEW_KEY,
    episode_view,
    frames_from_list,
    record_facts,
    sample_from_extra_info,
    summary_from_dict,
    tool_record_facts,
)


DEFAULT_PRESET = "csgrpo"


# The chat scaffolding around a tool turn in a decoded multi-turn response (with or without
# special tokens): `<|im_end|>\n<|im_start|>user\n<tool_response>...</tool_response><|im_end|>\n<|im_start|>assistant\n`.
_TOOL_TURN = re.compile(
    r"(?:<\|im_end\|>)?\s*(?:<\|im_start\|>)?user\n<tool_response>.*?</tool_response>\s*(?:<\|im_end\|>)?\s*(?:<\|im_start\|>)?assistant\n",
    re.DOTALL,
)


def assistant_turns_of(text: str) -> list[str]:
    """The assistant turns of a decoded response whose tool turns are in the text (verl's `ToolAgentLoop`)."""
    return [turn.removesuffix("<|im_end|>") for turn in _TOOL_TURN.split(text or "")]


def episode_from_response(text: str, duration: float, tool_record: dict[str, Any] | None = None) -> EpisodeSummary:
    """An episode read from a decoded response (rows not produced by `VideoSeekAgentLoop`); with the
    calls the `VideoSeekTool` adapters recorded (`extra_info["videoseek_tool"]`, verl's
    `ToolAgentLoop`), its turns are split at the tool responses and its calls are the tools' (the
    clipped spans and the zooms' (time, box), in order)."""
    # The last answer, closed or cut off by the token limit (`unclosed=True`), as the agent loop's parser accepts it.
    answer = last_block(text or "", "answer", unclosed=True)
    prediction = answer.strip() if answer is not None else None
    if not tool_record:
        return EpisodeSummary(prediction=prediction, assistant_turns=[text or ""], calls=[], invalid_calls=0, duration=duration)
    return EpisodeSummary(
        prediction=prediction,
        assistant_turns=assistant_turns_of(text),
        calls=[(float(s), float(e)) for s, e in tool_record.get("calls") or []],
        zooms=[(float(t), [float(v) for v in box]) for t, box in tool_record.get("zooms") or []],
        call_frames=frames_from_list(tool_record.get("call_frames")),
        invalid_calls=int(tool_record.get("invalid_calls") or 0),
        duration=duration,
    )


def configured_tools(extra_info: dict[str, Any], record: dict[str, Any] | None) -> list[str]:
    """The names of the run's tools: the agent loop's env tools, else the row's (`export-verl`), else the defaults."""
    if record and record.get("tools") is not None:
        return [str(t) for t in record["tools"]]
    if extra_info.get(TOOLS_KEY) is not None:
        return [str(t) for t in extra_info[TOOLS_KEY]]
    return tool_names(list(DEFAULT_TOOLS))


def reward_config(extra_info: dict[str, Any], record: dict[str, Any] | None, preset: str | None) -> RewardConfig:
    """The agent loop's full `RewardConfig`; else a preset named by the row's `extra_info.reward_preset`,
    by `preset` (reward_kwargs), or the default preset."""
    if record and record.get("reward_config"):
        return RewardConfig.model_validate(record["reward_config"])
    return RewardConfig(preset=extra_info.get("reward_preset") or preset or DEFAULT_PRESET)


def compute_score(
    data_source: str | None = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    preset: str | None = None,
    **unused: Any,
) -> dict[str, Any]:
    """Score one trajectory; returns `{"score": total, "acc": accuracy, ...components, "videoseek_episode": JSON}`.

    `preset` may come from `reward.custom_reward_function.reward_kwargs`; the agent loop's preset
    wins when both are given. A malformed `extra_info` (no sample) raises `DataError` naming the
    field: that is a data problem, never something a policy wrote.
    """
    info = dict(extra_info or {})
    sample = sample_from_extra_info(info)
    record = info.get(EXTRA_KEY) or None
    config = reward_config(info, record, preset)
    if record is not None and record.get("episode") is not None:
        episode = summary_from_dict(record["episode"])
    else:
        episode = episode_from_response(solution_str, float(sample.duration or 0.0), info.get(TOOL_KEY))

    total, components = score_episode(sample, episode, config)
    group_reward = (record or {}).get("group_reward")
    group_term = 0.0
    if group_reward is not None:
        group_term = float(group_reward) - float(total)
        total = float(group_reward)
    failed = bool((record or {}).get("failure"))
    if failed:  # the env could not run this episode: no signal; the estimator drops the row
        total = 0.0

    evidence = (record or {}).get("evidence") or {}
    tools = configured_tools(info, record)
    if record is not None:
        facts = record_facts(record)
    else:
        facts = tool_record_facts(info.get(TOOL_KEY), episode.assistant_turns, tools)
    out: dict[str, Any] = {
        "score": float(total),
        "acc": float(accuracy_reward(episode.prediction, sample)),
        "coverage": float(evidence.get("coverage", 0.0)),
        **metrics_of(facts, tools),  # calls, calls/<tool>, crop_rate, tool_rate/<tool>, invalid_calls, valid_format, turns, tokens
        "truncated": float(episode.truncated),
        "failed": float(failed),
        "group_term": group_term,
    }
    for name in config.component_weights():
        out[name] = float(components.get(name, 0.0))
    # For the viewer (`videoseek view RUN` reads verl's `trainer.rollout_data_dir` dumps, which
    # write every reward extra key): the sample and the episode as one JSON string (verl's
    # validation metrics skip string values; a string stacks into a numpy array as one cell).
    out[VIEW_KEY] = episode_view(sample, record)
    return out
