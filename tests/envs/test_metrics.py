"""One definition of the tool-use metrics (`videoseek.envs.metrics`): the same episodes give the same
numbers through every path that reports them.

Six scripted episodes on the real synthetic video, with the tools crop_video and zoom: a crop, a
zoom and a crop, a call the env refuses (start after end), a crop then an answer the parser has to
repair (no `</answer>`), an answer without a call, and a crop then a malformed call that ends the
episode. Each path plays or reads them its own way:

- `videoseek eval` (`agents.evaluate.summarize`) and the local backend's step metrics
  (`collapse.tool_use_metrics`) read the env's trajectories;
- verl's reward extras (`compute_score`) read `VideoSeekAgentLoop`'s record, built with the loop's
  own `records.loop_call_fields`, and, for verl's stock `ToolAgentLoop`, the record the real
  `VideoSeekTool` adapters keep when the calls verl's Hermes parser finds are run through them,
  with the decoded response; verl logs the mean of each key over the batch;
- the TRL reward's logs (`videoseek_reward`): the same calls through `VideoSeekTRLEnv`'s methods;
- the viewer's run aggregate reads the trajectory lines as JSON (`runindex`, `server.aggregate`).
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from videoseek.agents.evaluate import summarize
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.metrics import EpisodeFacts, facts_of_json, facts_of_trajectory, mean_metrics, metrics_of
from videoseek.training.local_backend.collapse import tool_use_metrics

TOOLS = ["crop_video", "zoom"]
CROP = '<think>Look closer.</think><tool_call>{"name": "crop_video", "arguments": {"start": 11.5, "end": 14.0}}</tool_call>'
ZOOM = '<think>Closer still.</think><tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.25, 0.25, 0.75, 0.75]}}</tool_call>'
REFUSED = '<think>Backwards.</think><tool_call>{"name": "crop_video", "arguments": {"start": 14.0, "end": 11.5}}</tool_call>'
MALFORMED = '<tool_call>{"name": "crop_video", "arguments": {"start": 1,</tool_call>'  # not JSON: no parser runs it
ANSWER = "<think>Green at 12.5s.</think><answer>B</answer>"
REPAIRED = "<think>Green.</think><answer>B"  # the env's parser adds the missing </answer>

SCRIPTS = {
    "crop": [CROP, ANSWER],
    "zoom-crop": [ZOOM, CROP, ANSWER],
    "refused": [REFUSED, ANSWER],  # no accepted call: crop_rate 0, one invalid call, the format is valid
    "repaired": [CROP, REPAIRED],  # a repaired turn: the format is not valid
    "blind": [ANSWER],
    "malformed": [CROP, MALFORMED],  # the last turn allowed: an invalid call, truncated without an answer
}
n = len(SCRIPTS)
EXPECTED = {
    "calls": 5 / n, "calls/crop_video": 4 / n, "calls/zoom": 1 / n,
    "crop_rate": 4 / n, "tool_rate/crop_video": 4 / n, "tool_rate/zoom": 1 / n,
    "invalid_calls": 2 / n, "valid_format": 4 / n, "turns": 12 / n, "tokens": 0.0,
}  # fmt: skip
TOOL_TURN = "<|im_end|>\n<|im_start|>user\n<tool_response>{}</tool_response><|im_end|>\n<|im_start|>assistant\n"


def env_config(script: list[str]) -> EnvConfig:
    # max_turns: the script's last turn is the episode's last (the malformed one ends it truncated)
    return EnvConfig(initial_frames=2, frames_per_call=2, max_pixels=56 * 112, max_turns=len(script), tools=TOOLS)


@pytest.fixture
def sample(index_sample):
    return index_sample.model_copy(update={"duration": 20.0})  # as export-verl writes it


@pytest.fixture
def played(sample):
    """{name: the env after the script} for each script, each episode its own group (as `run_rollouts` ids them)."""
    out = {}
    for name, script in SCRIPTS.items():
        env = VideoSeekEnv(sample, env_config(script))
        env.reset(seed=0, options={"episode_id": f"{name}/g0", "group": {"id": name, "index": 0}})
        for text in script:
            _, _, terminated, truncated, _ = env.step(text)
            if terminated or truncated:
                break
        assert terminated or truncated, name
        out[name] = env
    return out


def verl_logged(rows: list[dict]) -> dict[str, float]:
    """What verl logs of the reward extras: each key's mean over the batch (the tool-use keys here)."""
    return {k: sum(r[k] for r in rows) / len(rows) for k in EXPECTED}


def test_the_episodes_facts_and_metrics(played):
    facts = {name: facts_of_trajectory(env.trajectory) for name, env in played.items()}
    assert facts["refused"] == EpisodeFacts(invalid_calls=1, answered=True, turns=2)
    assert facts["repaired"] == EpisodeFacts(calls={"crop_video": 1}, repaired_turns=1, answered=True, turns=2)
    assert facts["malformed"] == EpisodeFacts(calls={"crop_video": 1}, invalid_calls=1, malformed_turns=1, truncated=True, turns=2)
    refused = metrics_of(facts["refused"], TOOLS)
    assert (refused["crop_rate"], refused["calls"], refused["invalid_calls"], refused["valid_format"]) == (0.0, 0.0, 1.0, 1.0)
    assert mean_metrics(list(facts.values()), TOOLS) == pytest.approx(EXPECTED)
    assert EpisodeFacts.from_dict(json.loads(json.dumps(facts["zoom-crop"].to_dict()))) == facts["zoom-crop"]
    # a trajectory line as JSON gives the same facts; anything else gives no facts and no exception
    for env in played.values():
        assert facts_of_json(json.loads(env.trajectory.model_dump_json())) == facts_of_trajectory(env.trajectory)
    assert facts_of_json(None) == EpisodeFacts() and facts_of_json({"turns": [1, {"call": 3, "action": []}]}).turns == 2


def test_eval_and_the_local_step_metrics_report_the_same_numbers(played):
    trajs = [env.trajectory for env in played.values()]
    m = summarize(trajs, TOOLS)
    flat = {k: m[k] for k in ("calls", "crop_rate", "invalid_calls", "valid_format", "turns", "tokens")}
    flat |= {f"calls/{k}": v for k, v in m["calls_per_tool"].items()} | {f"tool_rate/{k}": v for k, v in m["tool_rate"].items()}
    assert flat == pytest.approx(EXPECTED) and m["invalid_call_rate"] == pytest.approx(2 / 7)
    assert tool_use_metrics(trajs, TOOLS) == pytest.approx(EXPECTED)


def test_verl_agent_loop_records_give_the_same_numbers(played, sample):
    pytest.importorskip("verl")
    from videoseek.rewards import RewardConfig
    from videoseek.training.verl_plugin.records import EXTRA_KEY, loop_call_fields, sample_to_json, summary_to_dict
    from videoseek.training.verl_plugin.reward_fn import compute_score

    rows = []
    for env in played.values():
        record = {  # as VideoSeekAgentLoop._record builds it
            "reward_preset": "csgrpo", "reward_config": RewardConfig(preset="csgrpo").model_dump(mode="json"),
            "episode": summary_to_dict(env.summary()), **loop_call_fields(env.trajectory, TOOLS),
            "evidence": env.evidence.snapshot(), "failure": None, "group_reward": None,
        }  # fmt: skip
        rows.append(compute_score("synthetic", "", "B", {"sample": sample_to_json(sample), EXTRA_KEY: record}))
    assert len({tuple(r) for r in rows}) == 1  # every row has the same keys (verl stacks them)
    assert verl_logged(rows) == pytest.approx(EXPECTED)


def test_verl_tool_agent_loop_rows_give_the_same_numbers(sample):
    """The stock `ToolAgentLoop`: each turn's calls found as verl's Hermes parser finds them, run by the
    real adapters (an unknown tool or non-JSON arguments verl answers itself); the decoded response."""
    pytest.importorskip("verl")
    from videoseek.training.verl_plugin.records import TOOL_KEY, sample_to_json
    from videoseek.training.verl_plugin.reward_fn import compute_score
    from videoseek.training.verl_plugin.tool_adapter import VideoSeekTool

    adapters = {name: VideoSeekTool({"type": "native", "tool": name, "env": {"frames_per_call": 2, "max_pixels": 56 * 112}}, None)
                for name in TOOLS}  # fmt: skip

    class AgentData:  # the part of verl's AgentData a tool sees
        extra_fields: dict

    async def run_call(name: str, arguments: dict, data: AgentData) -> None:
        tool = adapters[name]
        instance, _ = await tool.create(create_kwargs={"sample": sample_to_json(sample)})
        try:
            await tool.execute(instance, arguments, agent_data=data)
        finally:
            await tool.release(instance)

    rows = []
    for script in SCRIPTS.values():
        data = AgentData()
        data.extra_fields = {}
        text = ""
        for turn in script:
            calls = []
            for match in re.findall(r"<tool_call>(.*?)</tool_call>", turn, re.DOTALL):  # verl's HermesToolParser
                try:
                    call = json.loads(match)
                    calls.append((call["name"], call["arguments"]))
                except (ValueError, KeyError):
                    continue
            text += turn
            if not calls:  # no call: verl's loop ends the episode
                break
            for name, arguments in calls:
                if name in adapters:
                    asyncio.run(run_call(name, arguments, data))
            text += TOOL_TURN.format("frames")
        info = {"sample": sample_to_json(sample), "tools": TOOLS, "reward_preset": "csgrpo"}
        if TOOL_KEY in data.extra_fields:
            info[TOOL_KEY] = data.extra_fields[TOOL_KEY]
        rows.append(compute_score("synthetic", text, "B", info))
    assert len({tuple(r) for r in rows}) == 1
    assert verl_logged(rows) == pytest.approx(EXPECTED)


def test_trl_logs_give_the_same_numbers(sample):
    pytest.importorskip("trl")
    from videoseek.integrations.trl import VideoSeekTRLEnv, sample_row, videoseek_reward

    envs, completions = [], []
    for script in SCRIPTS.values():
        env = VideoSeekTRLEnv(env_config(script))
        env.reset(**sample_row(sample))
        for turn in script[:-1]:  # TRL parses each call and runs the env's method; the last turn is the completion's end
            call = json.loads(re.search(r"<tool_call>(.*?)</tool_call>", turn, re.DOTALL).group(1))
            getattr(env, call["name"])(**call["arguments"])
        envs.append(env)
        completions.append([{"role": "assistant", "content": script[-1]}])
    logged: dict[str, float] = {}
    videoseek_reward(completions, envs, log_metric=logged.__setitem__)
    assert {k: logged[f"videoseek/{k}"] for k in EXPECTED} == pytest.approx(EXPECTED)


def test_the_viewers_run_aggregate_gives_the_same_numbers(played):
    from videoseek.viewer.runindex import summarize as index_row
    from videoseek.viewer.server import TOOL_USE, aggregate

    rows = [index_row(json.loads(env.trajectory.model_dump_json()), i, i + 1, 0, 0) for i, env in enumerate(played.values())]
    assert [r.calls for r in rows] == [sum(facts_of_trajectory(env.trajectory).calls.values()) for env in played.values()]
    assert {k: aggregate(rows)[k] for k in TOOL_USE} == pytest.approx({k: EXPECTED[k] for k in TOOL_USE})
