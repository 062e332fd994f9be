"""`export-verl` rows and `export-sft` conversations, read back by verl's own SFT dataset."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from videoseek.envs.env import EnvConfig
from videoseek.envs.sample import DataError, VideoSample, write_jsonl
from videoseek.training.exports.verl_parquet import export_samples, split_samples
from videoseek.training.exports.sft import export_sft, system_text

from videoseek.cli import main as cli_main


def test_export_row_layout(tmp_path, index_sample):
    path = export_samples([index_sample], tmp_path, "train", EnvConfig(initial_frames=4, max_pixels=56 * 112), progress=False)
    row = pd.read_parquet(path).iloc[0]
    assert row["agent_name"] == "videoseek" and row["reward_model"]["ground_truth"] == "B"
    prompt = list(row["prompt"])
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert prompt[1]["content"].count("<video>") == 1 and "Which colour flashes?" in prompt[1]["content"]
    video = row["videos"][0]
    assert len(video["video"]) == 4 and all(p.endswith(".jpg") for p in video["video"])
    assert video["sample_fps"] == pytest.approx(4 / 20.0)
    sample = VideoSample.model_validate(json.loads(row["extra_info"]["sample"]))
    assert sample.duration == pytest.approx(20.0) and sample.clue_intervals == index_sample.clue_intervals


def test_split_is_seeded_and_disjoint(index_sample):
    samples = [index_sample.model_copy(update={"id": f"s{i}"}) for i in range(10)]
    train, val = split_samples(samples, 0.2, seed=1)
    assert len(val) == 2 and len(train) == 8 and not {s.id for s in train} & {s.id for s in val}
    assert split_samples(samples, 0.2, seed=1) == (train, val)


def test_cli_export_verl_and_bad_data(tmp_path, index_sample, capsys):
    data = write_jsonl([index_sample, index_sample.model_copy(update={"id": "idx-2"})], tmp_path / "samples.jsonl")
    assert cli_main(["export-verl", "--data", str(data), "--out", str(tmp_path / "out"), "--val-fraction", "0.5", "--initial-frames", "2"]) == 0
    assert len(pd.read_parquet(tmp_path / "out" / "train.parquet")) == 1 and len(pd.read_parquet(tmp_path / "out" / "val.parquet")) == 1
    capsys.readouterr()  # drop the progress bars
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "video": "v.mp4", "question": "q", "answer": "A", "problem_type": "multiple_choice"}\n')
    assert cli_main(["export-verl", "--data", str(bad), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:1" in err and len(err.strip().splitlines()) == 1


def test_cli_export_verl_tools(tmp_path, index_sample, capsys):
    """`--tools` sets the env's tools: the rows' system prompt is theirs, and each gets tools_kwargs;
    an unknown tool is a one-line error that names it."""
    from videoseek.envs.tools import system_prompt

    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    assert cli_main(["export-verl", "--data", str(data), "--out", str(tmp_path / "out"), "--val-fraction", "0", "--tools", "crop_video,zoom"]) == 0
    row = pd.read_parquet(tmp_path / "out" / "train.parquet").iloc[0]
    assert list(row["extra_info"]["tools"]) == ["crop_video", "zoom"]
    assert sorted(k for k, v in row["extra_info"]["tools_kwargs"].items() if v is not None) == ["crop_video", "zoom"]
    assert row["prompt"][0]["content"] == system_prompt(["crop_video", "zoom"])
    assert row["extra_info"]["reward_preset"] == "csgrpo"  # what compute_score scores the rows with on ToolAgentLoop
    # the run record of a verl run from these rows (the viewer reads it above OUT/rollouts)
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["command"] == "export-verl" and record["env"]["tools"] == ["crop_video", "zoom"] and record["agent"] == "videoseek"
    assert record["data_files"][0]["sha256"] and record["parquet"] == [str(tmp_path / "out" / "train.parquet")]
    assert cli_main(["export-verl", "--data", str(data), "--out", str(tmp_path / "tg"), "--val-fraction", "0", "--reward", "dmgrpo", "--agent", "tool_agent"]) == 0
    assert pd.read_parquet(tmp_path / "tg" / "train.parquet").iloc[0]["extra_info"]["reward_preset"] == "dmgrpo"
    from videoseek.viewer.rewardinfo import find_reward_config

    (tmp_path / "tg" / "rollouts").mkdir()  # where verl's trainer.rollout_data_dir dumps go
    assert find_reward_config(tmp_path / "tg" / "rollouts")[0].preset == "dmgrpo"
    assert cli_main(["export-verl", "--data", str(data), "--out", str(tmp_path / "none"), "--val-fraction", "0", "--tools", ""]) == 0
    row = pd.read_parquet(tmp_path / "none" / "train.parquet").iloc[0]
    assert list(row["extra_info"]["tools"]) == [] and row["prompt"][0]["content"] == system_prompt([])
    capsys.readouterr()
    assert cli_main(["export-verl", "--data", str(data), "--out", str(tmp_path / "bad"), "--tools", "crop_video,telescope"]) == 2
    err = capsys.readouterr().err
    assert "telescope" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_sft_conversations_train_on_assistant_tokens_only(tmp_path, index_sample):
    pytest.importorskip("verl")
    from transformers import AutoProcessor
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    from videoseek.agents.policy import load_policy
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.tiny_model import ensure_tiny_model

    run = tmp_path / "oracle"
    trajs = run_rollouts([index_sample], load_policy("oracle"), env_config=EnvConfig(initial_frames=4, frames_per_call=4, max_pixels=56 * 112), out_dir=run, progress=False)
    assert trajs[0].terminated and trajs[0].calls
    if not trajs[0].correct:  # the index video has no colours: the oracle may guess wrong
        with pytest.raises(DataError, match="no episode to export"):
            export_sft([run], tmp_path / "none")
    (path,) = export_sft([run], tmp_path / "sft", only_correct=False)
    row = pd.read_parquet(path).iloc[0]
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant", "user", "assistant"]
    assert row["messages"][0]["content"] == system_text() and "crop_video" in system_text()

    model = ensure_tiny_model(cache_dir=tmp_path / "models")
    processor = AutoProcessor.from_pretrained(model)
    dataset = MultiTurnSFTDataset(str(path), processor.tokenizer, {"max_length": 4096, "pad_mode": "no_padding", "truncation": "error"}, processor)
    item = dataset[0]
    ids, loss = item["input_ids"], item["loss_mask"]
    learned = processor.tokenizer.decode(ids[loss.bool()])
    expected = "".join(turn.assistant + "<|im_end|>\n" for turn in trajs[0].turns)
    assert learned == expected  # the loss covers exactly the assistant turns (and their end of turn)
    grid = item["multi_modal_inputs"]["video_grid_thw"]
    assert grid.shape[0] == 2  # the initial frames and the crop
    pads = int((ids == processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")).sum())
    assert pads == int((grid.prod(dim=1) // 4).sum())
