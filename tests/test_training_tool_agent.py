"""`CropVideoTool` through verl's stock `ToolAgentLoop` on the v1 path (`AgentLoopWorkerTQ`, `PPOTrainerSync.step`).

The ready tool config (`training/configs/tools/crop_video_tool.yaml`) as shipped, rows from
`export-verl --agent tool_agent`, verl's own loop, Hermes parser and reward path, two trainer
steps, with the CPU harness of the v1 tests (`verl_harness.py`): its server checks that every
request holds one placeholder per image (the tool's frames) and per video (the sparse frames)
and records the ids vLLM would run; the tiny model's forward on what verl stored raises if image
tokens and image features disagree.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

from verl_harness import ANSWER, CROP, ENV, InMemoryTransferQueue, V1Run, make_config  # noqa: E402
from videoseek.agents.tiny_model import ensure_tiny_model  # noqa: E402
from videoseek.envs.env import EnvConfig  # noqa: E402
from videoseek.envs.sample import DataError, VideoSample  # noqa: E402
from videoseek.rewards import EpisodeSummary, RewardConfig, score_episode  # noqa: E402
from videoseek.training.exports.verl_parquet import export_samples  # noqa: E402
from videoseek.training.verl_plugin.crop_video_tool import MAX_TEXT, CropVideoTool, tool_text  # noqa: E402
from videoseek.training.verl_plugin.records import TOOL_AGENT_NAME, TOOL_KEY, sample_to_json  # noqa: E402
from videoseek.training.verl_plugin.reward_fn import assistant_turns_of  # noqa: E402

TOOL_CONFIG = Path(__file__).resolve().parents[1] / "training" / "configs" / "tools" / "crop_video_tool.yaml"
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


def test_export_puts_the_sample_in_the_tools_create_kwargs(exported, sample):
    row = pd.read_parquet(exported).iloc[0]
    assert row["agent_name"] == "tool_agent"
    assert row["extra_info"]["tools_kwargs"]["crop_video"]["create_kwargs"]["sample"] == row["extra_info"]["sample"]
    assert VideoSample.model_validate_json(row["extra_info"]["sample"]).id == sample.id


def test_tool_crops_through_the_env_and_malformed_calls_cost_a_turn(sample):
    tool = CropVideoTool({"type": "native", "env": {"frames_per_call": 4, "max_turns": 3, "max_total_frames": 6}}, None)
    assert tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True)["function"]["name"] == "crop_video"
    data = AgentData()
    response, _, _ = call(tool, sample, {"start": 11.5, "end": 14.0}, data)
    assert len(response.image) == 4 and response.text.startswith("crop_video returned 4 frames from 11.5s to 14.0s")
    for bad in ({"start": "abc", "end": 3}, {"begin": 1}):  # a value that is not a time, a missing argument
        response, _, _ = call(tool, sample, bad, data)
        assert response.image is None and response.text.startswith("Error")
    assert data.extra_fields[TOOL_KEY] == {"calls": [[11.5, 14.0]], "invalid_calls": 2, "frames": 4}
    response, _, _ = call(tool, sample, {"start": 1, "end": 2}, data)  # three calls made: the budget is spent
    assert response.image is None and "budget" in response.text
    with pytest.raises(DataError, match="create_kwargs.sample"):
        asyncio.run(tool.create(create_kwargs={}))


def test_frame_budget_spans_the_episode(sample):
    tool = CropVideoTool({"type": "native", "env": {"frames_per_call": 4, "max_total_frames": 6}}, None)
    data = AgentData()
    assert len(call(tool, sample, {"start": 1, "end": 3}, data)[0].image) == 4
    second = call(tool, sample, {"start": 5, "end": 7}, data)[0]
    assert len(second.image or []) == 2  # 6 - 4 left


def test_tool_text_keeps_the_times_within_verls_cap():
    times = np.linspace(100.0, 163.0, 64)
    text = tool_text("x" * 400, times, (100.0, 163.0))
    assert len(text) <= MAX_TEXT and "100.0s" in text and "163.0s" in text
    short = np.array([12.0, 12.5, 13.0])
    assert tool_text("x" * 400, short, (12.0, 13.0)).endswith("at 12.0, 12.5, 13.0s.")


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
                assert record == {"calls": [[11.5, 14.0]], "invalid_calls": 0, "frames": 8}
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
