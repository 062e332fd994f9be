"""The toolbox: tools as a registry (`videoseek.envs.tools`), dispatched by name, checked by schema, recorded by name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from videoseek.envs import EnvConfig, VideoSeekEnv
from videoseek.envs.actions import CropVideo, Think, ToolCall, parse_action
from videoseek.envs.tools import (
    TOOLS, Tool, ToolError, ToolResult, check_arguments, get_tool, register_tool, system_prompt, think_nudge, tool_schemas,
)  # fmt: skip
from videoseek.envs.trajectory import Trajectory

# The system prompt of VideoSeek's single-tool days, word for word: the tiny model's tokenizer was
# trained on it and every recorded run holds its tokens, so the default tools must reproduce it.
SINGLE_TOOL_PROMPT = """You answer a question about a video. You first see a few frames sampled from the whole video, each with its time in seconds. You can look closer at any part of the video with the crop_video tool: it returns frames from the time span you ask for, with their times.

In every turn, first reason inside <think> </think>, then do exactly one of the following:
- look closer at a time span: <tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 18.5}}</tool_call>
- give your final answer: <answer>your answer</answer>

Times are seconds from the start of the video; start must be smaller than end and the span must lie inside the video. Call the tool at most once per turn, and only for spans you still need: short crops that cover where the answer is visible help, repeated or irrelevant crops are penalised. When you describe what you see, cite the frame time (for example "at 12.5s"). For a multiple-choice question answer with the option letter only (for example <answer>B</answer>); for a number give the number; for a time span give [start, end] in seconds."""
CUSTOM = "examples/custom_tool.py:FrameAtTool"


def test_default_tools_keep_the_single_tool_prompt_and_schema():
    assert system_prompt(["crop_video"]) == SINGLE_TOOL_PROMPT
    (schema,) = tool_schemas(["crop_video"])
    assert schema["function"]["name"] == "crop_video" and schema["function"]["parameters"]["required"] == ["start", "end"]
    assert think_nudge(["crop_video"]).startswith("Continue. Call crop_video(start, end)")


def test_prompt_and_schemas_follow_the_configured_tools(index_sample):
    _, info = VideoSeekEnv(index_sample, EnvConfig(tools=["crop_video", "zoom", CUSTOM])).reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["crop_video", "zoom", "frame_at"]
    calls = [parse_action(line.split(": ", 1)[1]).action for line in info["instructions"].splitlines() if "<tool_call>" in line]
    assert [c.name for c in calls] == ["crop_video", "zoom", "frame_at"]  # each example line parses as its tool
    assert "Call at most one tool per turn" in info["instructions"]
    _, info = VideoSeekEnv(index_sample, EnvConfig(tools=[])).reset(seed=0)
    assert info["tools"] == [] and "tool" not in info["instructions"]


@pytest.mark.parametrize("value, expected", [(True, ["crop_video"]), (False, []), ([], []), ("crop_video, zoom", ["crop_video", "zoom"]),
                                             (["zoom"], ["zoom"]), ([CUSTOM], [CUSTOM])])
def test_env_config_tools(value, expected):
    assert EnvConfig(tools=value).tools == expected
    assert EnvConfig.model_validate_json(EnvConfig(tools=value).model_dump_json()).tools == expected  # run.json round trip


@pytest.mark.parametrize("value, message", [(["crop_vdeo"], "unknown tool 'crop_vdeo'; registered tools: crop_video"),
                                            (["nowhere.mod:Tool"], "tool 'nowhere.mod:Tool' cannot be imported"),
                                            (["json:dumps"], "is not a videoseek Tool subclass"),
                                            (["zoom", "zoom"], "listed twice")])
def test_bad_tool_lists_are_one_line_errors(value, message):
    with pytest.raises(ValidationError, match=message) as err:
        EnvConfig(tools=value)
    assert len(str(err.value.errors()[0]["msg"]).splitlines()) == 1


def test_register_tool_refuses_clashes():
    class Other(Tool):
        name = "zoom"

    with pytest.raises(ValueError, match="already registered"):
        register_tool(Other)
    for bad in ("answer", "not an identifier", ""):
        with pytest.raises(ValueError, match="identifier"):
            register_tool(type("Bad", (Tool,), {"name": bad}))
    assert TOOLS["zoom"] is get_tool("zoom")


@pytest.mark.parametrize("arguments, message", [
    ({"start": 1}, "crop_video arguments: 'end' is a required property"),
    ({"start": "soon", "end": 2}, "crop_video argument 'start': 'soon' is not of type 'number'"),
    ({"start": float("nan"), "end": 2}, "crop_video argument 'start' must be a finite number"),
    ([1, 2], "crop_video arguments must be a JSON object, got list"),
])  # fmt: skip
def test_arguments_are_checked_against_the_schema(arguments, message):
    args, error = check_arguments(get_tool("crop_video"), arguments)
    assert args is None and error == message


def test_numpy_arguments_are_plain_values():
    args, error = check_arguments(get_tool("zoom"), {"time": np.float32(1.5), "box": np.array([0.1, 0.2, 0.3, 0.4])})
    assert error is None and args == {"time": 1.5, "box": pytest.approx([0.1, 0.2, 0.3, 0.4])} and type(args["time"]) is float


def test_parser_reads_any_tool_by_name():
    assert parse_action('<tool_call>{"name": "Zoom", "arguments": "{\\"time\\": 2, \\"box\\": [0, 0, 1, 1]}"}</tool_call>').action == ToolCall(
        "zoom", {"time": 2, "box": [0, 0, 1, 1]})
    parsed = parse_action('<tool_call>{"name": "frame_at", "time": 3}</tool_call>')
    assert parsed.action == ToolCall("frame_at", {"time": 3}) and "arguments at top level" in parsed.repairs
    assert parse_action('<tool_call>{"name": "zoom", "arguments": [1, 2]}</tool_call>').action.reason.startswith("zoom arguments must be a JSON object")
    assert parse_action("<retrieve>1, 2</retrieve>").action == CropVideo(1.0, 2.0)  # the lenient dialects stay crop_video's


def play(env, *actions):
    infos = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        infos.append((obs, info))
    return infos


def test_env_dispatches_by_name_and_records_calls(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=["crop_video", CUSTOM]))
    env.reset(seed=0)
    (obs, info), (obs2, info2), (obs3, info3) = play(env, CropVideo(12.0, 13.5), ToolCall("frame_at", {"time": 12.5}),
                                                     '<tool_call>{"name": "zoom", "arguments": {"time": 1, "box": [0, 0, 1, 1]}}</tool_call>')
    assert info["error"] is None and info2["error"] is None and len(obs2["frames"]) == 1 and obs2["timestamps"][0] == pytest.approx(12.5)
    assert "frame_at returned the frame at 12.5s" in obs2["text"]
    assert info3["error"] == "unknown tool 'zoom'; this episode's tools: crop_video, frame_at" and len(obs3["frames"]) == 0
    crop, frame_at = env.trajectory.calls
    assert (crop.index, crop.tool, crop.span, frame_at.index, frame_at.tool, frame_at.arguments) == (0, "crop_video", (12.0, 13.5), 1, "frame_at", {"time": 12.5})
    assert frame_at.span is None and frame_at.gain == 0.0 and env.trajectory.turns[1].evidence["gain"] is None
    assert [t.tool_name for t in env.trajectory.turns] == ["crop_video", "frame_at", "zoom"] and env.trajectory.invalid_calls == 1
    assert env.summary().calls == [(12.0, 13.5)]  # only the span-retrieving call is temporal evidence


class Refuses(Tool):
    name = "refuses"
    parameters = {"type": "object", "properties": {"why": {"type": "string"}}, "required": ["why"]}
    returns_frames = False

    def run(self, env, why):
        if why == "bug":
            raise KeyError("a tool bug")
        if why == "no":
            raise ToolError("not\nnow")
        return ToolResult(text=f"noted {why}")


def test_tool_errors_and_tool_bugs_spend_the_turn_without_crashing(index_sample):
    register_tool(Refuses)
    env = VideoSeekEnv(index_sample, EnvConfig(tools=["refuses"], max_total_frames=8, initial_frames=8))
    env.reset(seed=0)
    results = play(env, ToolCall("refuses", {"why": "no"}), ToolCall("refuses", {"why": "bug"}), ToolCall("refuses", {"why": "ok"}))
    assert [info["error"] for _, info in results] == ["not now", "refuses failed (KeyError: 'a tool bug')", None]
    assert results[2][0]["text"] == "noted ok" and len(results[2][0]["frames"]) == 0  # text-only, even with the frame budget spent
    assert env.trajectory.invalid_calls == 2 and [c.tool for c in env.trajectory.calls] == ["refuses"]


def test_frame_budget_refuses_frame_tools(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=["crop_video", CUSTOM], max_total_frames=9, initial_frames=8))
    env.reset(seed=0)
    (obs, info), (obs2, info2) = play(env, ToolCall("frame_at", {"time": 3.0}), ToolCall("frame_at", {"time": 4.0}))
    assert info["error"] is None and env.frames_left == 0 and "frame budget of 9 frames is spent" in info2["error"]


def test_a_bad_structured_tool_call_is_an_invalid_turn(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=["crop_video", "zoom"]))
    env.reset(seed=0)
    for action in (ToolCall(None, {}), ToolCall("zoom", "time=3"), ToolCall("zoom", {"time": object(), "box": [0, 0, 1, 1]})):
        _, _, terminated, _, info = env.step(action)
        assert isinstance(info["error"], str) and len(info["error"].splitlines()) == 1 and not terminated
    json.loads(env.trajectory.model_dump_json())  # the record stays writable


def test_schema_1_records_read_as_schema_2(index_sample):
    env = VideoSeekEnv(index_sample)
    env.reset(seed=0)
    play(env, CropVideo(12.0, 13.5), CropVideo(5.0, 1.0), "<answer>B</answer>")
    v2 = json.loads(env.trajectory.model_dump_json())
    v1 = json.loads(json.dumps(v2))
    v1["schema_version"] = 1
    for turn in v1["turns"]:  # the shapes version 1 wrote
        if turn["action"]["type"] == "tool_call":
            turn["action"] = {"type": "crop_video", **turn["action"]["arguments"]}
        if turn["call"]:
            c = turn["call"]
            turn["call"] = {k: c[k] for k in ("index", "start", "end", "clipped", "gain", "duplicate_of", "fragment", "best_prior_tiou")}
            turn["call"]["requested"] = [c["requested"]["start"], c["requested"]["end"]]
    old = Trajectory.model_validate(v1)
    assert [t.action for t in old.turns] == [t.action for t in env.trajectory.turns]
    assert old.calls == env.trajectory.calls and old.invalid_calls == 1


def test_observations_stay_in_the_space_with_zoom(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=["crop_video", "zoom"]))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    obs, *_ = env.step(ToolCall("zoom", {"time": 3.0, "box": [0.1, 0.2, 0.9, 0.4]}))
    assert env.observation_space.contains(obs) and obs["frames"].shape[2] > obs["frames"].shape[1]  # the box's aspect ratio
    assert env.observation_space.sample()["frames"].dtype == np.uint8


def test_module_doctests():
    import doctest

    import videoseek.envs.protocol
    import videoseek.envs.tools.base
    import videoseek.envs.tools.prompt
    import videoseek.rewards.clue_seek
    import videoseek.rewards.grounding
    from videoseek.envs.tools import get_tool

    custom = __import__(get_tool(CUSTOM).__module__)
    for mod in (videoseek.envs.tools.base, videoseek.envs.tools.prompt, videoseek.envs.protocol, videoseek.rewards.clue_seek,
                videoseek.rewards.grounding, custom):
        assert doctest.testmod(mod).failed == 0, mod.__name__


def test_small_zoom_regions_are_enlarged_and_too_thin_ones_refused(index_sample):
    env = VideoSeekEnv(index_sample, EnvConfig(tools=["zoom"]))  # the index video is 192x96
    env.reset(seed=0)
    obs, *_, info = env.step(ToolCall("zoom", {"time": 3.0, "box": [0.0, 0.0, 0.05, 0.1]}))  # 10x10 px at native size
    assert info["error"] is None and obs["frames"].shape[1:3] == (32, 32)  # Qwen-VL refuses images under 28-32 px a side
    obs, *_, info = env.step(ToolCall("zoom", {"time": 3.0, "box": [0.0, 0.0, 1.0, 0.01]}))  # 192x1 px
    assert "too thin" in info["error"] and len(obs["frames"]) == 0
