"""`VideoSeekTool` (any VideoSeek tool) through verl's stock `ToolAgentLoop` on the v1 path
(`AgentLoopWorkerTQ`, `PPOTrainerSync.step`).

The ready tool configs (`training/configs/tools/crop_video_tool.yaml`, `crop_video_zoom.yaml`) as
shipped, one with the custom tool of `examples/custom_tool.py` added, rows from `export-verl
--agent tool_agent`, verl's own loop, Hermes parser and reward path, with the CPU harness of the v1
tests (`verl_harness.py`): its server checks that every request holds one placeholder per image
(the tools' frames) and per video (the sparse frames) and records the ids vLLM would run; the tiny
model's forward on what verl stored raises if image tokens and image features disagree.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

from verl_harness import ANSWER, CROP, ENV, FRAME_AT, FRAME_AT_TOOL, ZOOM, InMemoryTransferQueue, V1Run, make_config  # noqa: E402
from videoseek.agents.tiny_model import ensure_tiny_model  # noqa: E402
from videoseek.envs.env import EnvConfig  # noqa: E402
from videoseek.envs.sample import DataError, VideoSample  # noqa: E402
from videoseek.rewards import EpisodeSummary, RewardConfig, score_episode  # noqa: E402
from videoseek.training.exports.verl_parquet import export_samples  # noqa: E402
from videoseek.training.verl_plugin.records import TOOL_AGENT_NAME, TOOL_KEY, sample_to_json  # noqa: E402
from videoseek.training.verl_plugin.reward_fn import assistant_turns_of  # noqa: E402
from videoseek.training.verl_plugin.tool_adapter import MAX_TEXT, VideoSeekTool, tool_text  # noqa: E402

TOOL_CONFIGS = Path(__file__).resolve().parents[2] / "training" / "configs" / "tools"
TOOL_CONFIG = TOOL_CONFIGS / "crop_video_tool.yaml"
WRONG = "<think>No need to look.</think><answer>A</answer>"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return ensure_tiny_model(cache_dir=tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def sample(index_video):
    return VideoSample(
        id="idx-1", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green", "C. blue", "D. yellow"],
        answer="B", clue_intervals=[(12.0, 13.5)], duration=20.0,
    )  # fmt: skip


@pytest.fixture(scope="module")
def exported(tmp_path_factory, sample):
    other = sample.model_copy(update={"id": "idx-2", "question": "Which colour flashes in the video?"})
    return export_samples([sample, other], tmp_path_factory.mktemp("export"), "train", EnvConfig(**ENV), progress=False, agent_name=TOOL_AGENT_NAME)


@pytest.fixture
def store(monkeypatch):
    return InMemoryTransferQueue().install(monkeypatch)


class AgentData:
    """The part of verl's `AgentData` a tool sees: the per-trajectory `extra_fields`."""

    def __init__(self):
        self.extra_fields = {}


def call(tool, sample, arguments, agent_data):
    async def run():
        instance, _ = await tool.create(create_kwargs={"sample": sample_to_json(sample)})
        try:
            return await tool.execute(instance, arguments, agent_data=agent_data)
        finally:
            await tool.release(instance)

    return asyncio.run(run())


CROP_FRAMES = [11.6, 11.9, 12.2, 12.5, 12.9, 13.2, 13.5, 13.8]  # the 8 frames crop_video returns for [11.5, 14.0]


def test_export_puts_the_sample_in_each_tools_create_kwargs(exported, sample, tmp_path):
    row = pd.read_parquet(exported).iloc[0]
    assert row["agent_name"] == "tool_agent" and list(row["extra_info"]["tools"]) == ["crop_video"]
    assert row["extra_info"]["tools_kwargs"]["crop_video"]["create_kwargs"]["sample"] == row["extra_info"]["sample"]
    assert VideoSample.model_validate_json(row["extra_info"]["sample"]).id == sample.id
    tools = ["crop_video", "zoom", FRAME_AT_TOOL]
    path = export_samples([sample], tmp_path, "train", EnvConfig(**ENV, tools=tools), progress=False, agent_name=TOOL_AGENT_NAME)
    row = pd.read_parquet(path).iloc[0]
    assert list(row["extra_info"]["tools"]) == ["crop_video", "zoom", "frame_at"]
    kwargs = row["extra_info"]["tools_kwargs"]
    assert [name for name in kwargs if kwargs[name] is not None] == ["crop_video", "zoom", "frame_at"]  # pyarrow pads struct keys
    assert all(kwargs[name]["create_kwargs"]["sample"] == row["extra_info"]["sample"] for name in ("crop_video", "zoom", "frame_at"))
    system = row["prompt"][0]["content"]
    assert "zoom" in system and "frame_at" in system  # the system prompt of the configured tools


def test_the_adapter_takes_its_schema_from_the_tool_and_refuses_a_mismatch():
    from verl.tools.schemas import OpenAIFunctionToolSchema
    from videoseek.envs.tools import get_tool

    for spec in ("crop_video", "zoom", FRAME_AT_TOOL):
        tool = VideoSeekTool({"type": "native", "tool": spec}, None)
        assert tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) == get_tool(spec).schema() and tool.name == get_tool(spec).name
    with pytest.raises(ValueError, match="needs `tool`"):
        VideoSeekTool({"type": "native"}, None)
    with pytest.raises(ValueError, match="unknown tool 'nope'"):
        VideoSeekTool({"type": "native", "tool": "nope"}, None)
    with pytest.raises(ValueError, match="names 'crop_video' but config.tool is 'zoom'"):
        VideoSeekTool({"type": "native", "tool": "zoom"}, OpenAIFunctionToolSchema.model_validate(get_tool("crop_video").schema()))


def test_calls_play_through_the_env_and_malformed_calls_cost_a_turn(sample):
    env = {"frames_per_call": 4, "max_turns": 4, "max_total_frames": 6, "max_pixels": 56 * 112}
    crop, zoom = (VideoSeekTool({"type": "native", "tool": name, "env": env}, None) for name in ("crop_video", "zoom"))
    data = AgentData()
    response, _, _ = call(crop, sample, {"start": 11.5, "end": 14.0}, data)
    assert len(response.image) == 4 and response.text.startswith("crop_video returned 4 frames from 11.5s to 14.0s")
    response, _, _ = call(zoom, sample, {"time": 12.5, "box": [0.25, 0.25, 0.75, 0.75]}, data)
    assert len(response.image) == 1 and response.image[0].size == (96, 48)  # half of the 192x96 frame, at native resolution
    assert response.text.startswith("zoom returned the frame at 12.5s")
    response, _, _ = call(zoom, sample, {"time": 12.5, "box": [0.5, 0.5, 0.4, 0.9]}, data)  # x1 >= x2
    assert response.image is None and response.text.startswith("Error") and "x1 < x2" in response.text
    assert data.extra_fields[TOOL_KEY] == {"calls": [[11.5, 14.0]], "call_frames": [[11.8, 12.4, 13.0, 13.6]], "zooms": [[12.5, [0.25, 0.25, 0.75, 0.75]]],
                                           "tool_calls": {"crop_video": 1, "zoom": 1}, "invalid_calls": 1, "frames": 5}  # fmt: skip
    response, _, _ = call(crop, sample, {"start": "abc", "end": 3}, data)  # four calls of either tool: the budget is spent
    assert response.image is None and response.text.startswith("Error")
    response, _, _ = call(zoom, sample, {"time": 1.0, "box": [0, 0, 1, 1]}, data)
    assert response.image is None and "budget" in response.text
    with pytest.raises(DataError, match="tools_kwargs.zoom.create_kwargs.sample"):
        asyncio.run(zoom.create(create_kwargs={}))


def test_frame_budget_spans_the_episode_and_the_tools(sample):
    env = {"frames_per_call": 4, "max_total_frames": 5}
    crop, frame_at = (VideoSeekTool({"type": "native", "tool": name, "env": env}, None) for name in ("crop_video", FRAME_AT_TOOL))
    data = AgentData()
    assert len(call(crop, sample, {"start": 1, "end": 3}, data)[0].image) == 4
    assert len(call(frame_at, sample, {"time": 5.0}, data)[0].image) == 1
    last = call(crop, sample, {"start": 5, "end": 7}, data)[0]
    assert last.image is None and "frame budget" in last.text  # 5 - 4 - 1 left
    assert data.extra_fields[TOOL_KEY]["tool_calls"] == {"crop_video": 1, "frame_at": 1}


def test_tool_text_keeps_the_times_within_verls_cap():
    times = np.linspace(100.0, 163.0, 64)
    text = tool_text("crop_video", "x" * 400, times, (100.0, 163.0))
    assert len(text) <= MAX_TEXT and "100.0s" in text and "163.0s" in text
    short = np.array([12.0, 12.5, 13.0])
    assert tool_text("crop_video", "x" * 400, short, (12.0, 13.0)).endswith("at 12.0s, 12.5s, 13.0s.")
    assert tool_text("zoom", "y" * 400, np.array([12.5])) == "zoom returned 1 frame at 12.5s."
    assert tool_text("zoom", "Error: " + "z" * 400, np.zeros(0)).startswith("Error: ") and len(tool_text("zoom", "z" * 400, np.zeros(0))) == MAX_TEXT


def test_assistant_turns_are_split_at_tool_responses():
    text = f"{CROP}<|im_end|>\n<|im_start|>user\n<tool_response>\n<|image_pad|>Frames\n</tool_response><|im_end|>\n<|im_start|>assistant\n{ANSWER}<|im_end|>"
    assert assistant_turns_of(text) == [CROP, ANSWER]
    plain = text.replace("<|im_end|>", "").replace("<|im_start|>", "").replace("<|image_pad|>", "")  # skip_special_tokens
    assert assistant_turns_of(plain) == [CROP, ANSWER]


@pytest.mark.slow
def test_two_trainer_steps_through_verls_tool_agent_loop(tmp_path, tiny_model, exported, sample, store):
    overrides = {
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(TOOL_CONFIG),
        "actor_rollout_ref.rollout.multi_turn.format": "hermes",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 4,
        "actor_rollout_ref.rollout.agent.default_agent_loop": TOOL_AGENT_NAME,
    }
    cfg = make_config(tmp_path, tiny_model, exported, reward="csgrpo", response_length=512, group_size=2, batch_size=2, overrides=overrides)
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER], [WRONG]])
    image_pad = run.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merge = 4  # the tiny Qwen2.5-VL's spatial merge 2 x 2
    try:
        for step in (1, 2):
            batch, metrics, stored = run.step()
            assert len(batch) == 4 and run.actor.updates[-1]["keys"] == batch.keys
            cropped = 0
            rows = zip(stored["extra_fields"], stored["rm_scores"].unbind(), stored["input_ids"].unbind(), list(stored["multi_modal_inputs"]), stored["responses"].unbind())
            for extra, scores, ids, mm, response in rows:  # jagged rows: no padding
                record = extra.get(TOOL_KEY)
                text = run.tokenizer.decode(response, skip_special_tokens=False)
                turns = [CROP, ANSWER] if record else [WRONG]
                expected = EpisodeSummary(prediction="B" if record else "A", assistant_turns=turns,
                                          calls=[(11.5, 14.0)] if record else [], invalid_calls=0, duration=20.0)  # fmt: skip
                # the reward verl trained on is the env's score of the episode the loop played
                assert float(scores.sum()) == pytest.approx(score_episode(sample, expected, RewardConfig(preset="csgrpo"))[0])
                if not record:
                    assert "image_grid_thw" not in mm and image_pad not in ids.tolist()
                    continue
                cropped += 1
                assert record == {"calls": [[11.5, 14.0]], "call_frames": [CROP_FRAMES], "zooms": [], "tool_calls": {"crop_video": 1},
                                  "invalid_calls": 0, "frames": 8}  # fmt: skip
                # the tool's 8 frames are 8 images in the trained sequence, their tokens equal to their features
                assert mm["image_grid_thw"].shape[0] == 8 and "video_grid_thw" in mm  # the sparse frames stay a video
                assert int((ids == image_pad).sum()) == int(mm["image_grid_thw"].prod(-1).sum()) // merge
                tool = text.split("<tool_response>", 1)[1].split("</tool_response>", 1)[0]
                assert "crop_video returned 8 frames from 11.5s to 14.0s at " in tool and "(truncated)" not in tool
            assert cropped == 2
            assert metrics["actor/entropy"] > 0  # a real forward with pixel_values on what verl stored
        # every request the server saw held one placeholder per image, and vLLM's expansion of the
        # last turn of each cropping conversation is what verl trained on
        with_images = [r for r in run.server.requests if r["images"]]
        assert with_images and all(r["images"] == 8 for r in with_images)
        trained = [ids.tolist() for ids in stored["input_ids"].unbind()]
        last = with_images[-1]["expanded_ids"]
        assert any(t[: len(last)] == last for t in trained)
    finally:
        run.close()


@pytest.mark.slow
def test_a_trainer_step_with_crop_zoom_and_a_custom_tool(tmp_path, tiny_model, sample, store):
    """The shipped two-tool config plus the custom tool of examples/custom_tool.py (by its file path),
    rows exported for those tools: each tool's frames are images in the trained sequence, its call
    is recorded by tool, and the reward verl trained on is the env's score of that episode."""
    tools = ["crop_video", "zoom", FRAME_AT_TOOL]
    config = yaml.safe_load((TOOL_CONFIGS / "crop_video_zoom.yaml").read_text())
    assert [entry["config"]["tool"] for entry in config["tools"]] == ["crop_video", "zoom"]
    config["tools"].append({**config["tools"][0], "config": {**config["tools"][0]["config"], "tool": FRAME_AT_TOOL}})
    tool_config = tmp_path / "tools.yaml"
    tool_config.write_text(yaml.safe_dump(config))
    exported = export_samples([sample], tmp_path / "export", "train", EnvConfig(**ENV, tools=tools), progress=False, agent_name=TOOL_AGENT_NAME)
    overrides = {
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(tool_config),
        "actor_rollout_ref.rollout.multi_turn.format": "hermes",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 4,
        "actor_rollout_ref.rollout.agent.default_agent_loop": TOOL_AGENT_NAME,
    }
    # the system prompt and verl's tool list describe three tools: a longer prompt
    cfg = make_config(tmp_path, tiny_model, exported, reward="csgrpo", response_length=1024, group_size=2, batch_size=1, overrides=overrides,
                      prompt_length=2048)  # fmt: skip
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ZOOM, FRAME_AT, ANSWER], [WRONG]])
    image_pad = run.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    try:
        batch, metrics, stored = run.step()
        assert len(batch) == 2
        called = 0
        rows = zip(stored["extra_fields"], stored["rm_scores"].unbind(), stored["input_ids"].unbind(), list(stored["multi_modal_inputs"]), stored["responses"].unbind())
        for extra, scores, ids, mm, response in rows:
            record = extra.get(TOOL_KEY)
            if not record:
                continue
            called += 1
            assert record == {"calls": [[11.5, 14.0]], "call_frames": [CROP_FRAMES], "zooms": [[12.5, [0.25, 0.25, 0.75, 0.75]]],
                              "tool_calls": {"crop_video": 1, "zoom": 1, "frame_at": 1}, "invalid_calls": 0, "frames": 8 + 1 + 1}  # fmt: skip
            expected = EpisodeSummary(prediction="B", assistant_turns=[CROP, ZOOM, FRAME_AT, ANSWER], calls=[(11.5, 14.0)],
                                      zooms=[(12.5, [0.25, 0.25, 0.75, 0.75])], invalid_calls=0, duration=20.0)  # fmt: skip
            assert float(scores.sum()) == pytest.approx(score_episode(sample, expected, RewardConfig(preset="csgrpo"))[0])
            # 8 crop frames, the zoomed region (96x48: half the frame at native size) and the custom tool's frame, as images
            assert mm["image_grid_thw"].shape[0] == 10 and int((ids == image_pad).sum()) == int(mm["image_grid_thw"].prod(-1).sum()) // 4
            text = run.tokenizer.decode(response, skip_special_tokens=False)
            replies = [part.split("</tool_response>", 1)[0] for part in text.split("<tool_response>")[1:]]
            assert [re.search(r"(\w+) returned", r).group(1) for r in replies] == ["crop_video", "zoom", "frame_at"]  # after each call's images
            prompt = run.tokenizer.decode(ids[: len(ids) - len(response)])
            assert all(f'"name": "{name}"' in prompt for name in ("crop_video", "zoom", "frame_at"))  # verl lists the three schemas
        assert called == 1 and metrics["actor/entropy"] > 0
    finally:
        run.close()
