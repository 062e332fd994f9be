"""`VideoSeekAgentLoop` inside verl's legacy `AgentLoopWorker` (`trainer.use_v1=false`; CPU, tiny Qwen2.5-VL, real video).

The rows come from `export-verl` through verl's `RLHFDataset` and `collate_fn`; the worker
instantiates the loop from the agent-loop YAML and runs it against verl's real `LLMServerClient`
in front of an emulated vLLM server (scripted turns, or generation with the tiny model), then
applies verl's own post-processing (padding, multi-modal inputs, M-RoPE position ids) and verl's
reward path (`RewardLoopWorker` -> `NaiveRewardManager` -> our `compute_score`). What is emulated
and why: `verl_harness.py`. The default v1 path: `tests/training/test_verl_v1.py`.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from verl.utils import hf_processor
from verl_harness import (  # noqa: F401 - fixtures too
    TinyModelServer,
    exported,
    index_sample_module,
    run_worker,
    scripted,
    tiny_model,
    ANSWER,
    CROP,
    ENV,
    FRAME_AT,
    FRAME_AT_TOOL,
    ZOOM,
    FakeVLLMServer,
    InProcessReward,
    load_batch,
    make_config,
    server_client,
)
from videoseek.envs.env import EnvConfig
from videoseek.training.exports.verl_parquet import export_samples


def test_scripted_episode_through_verl_postprocessing_and_reward(tmp_path, tiny_model, exported):
    cfg = make_config(tmp_path, tiny_model, exported)
    server = scripted(tiny_model, [CROP, ANSWER])
    worker, out = run_worker(cfg, server, n=2)
    tokenizer = worker.tokenizer

    assert len(out) == 2
    responses, mask = out.batch["responses"], out.batch["response_mask"]
    attention = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    generated = list(itertools.chain.from_iterable(tokenizer.encode(t, add_special_tokens=False) + [end] for t in (CROP, ANSWER)))
    assert len(server.requests) == 4  # two turns per episode
    for row in range(2):
        model_tokens = responses[row][mask[row].bool()].tolist()
        assert model_tokens == generated  # mask is 1 exactly on what the server generated, in order
        context = responses[row][(attention[row].bool()) & (~mask[row].bool())].tolist()
        assert tokenizer.convert_tokens_to_ids("<|video_pad|>") in context  # the crop's frames, mask 0
        assert "<tool_response>" in tokenizer.decode(context)

    mm = out.non_tensor_batch["multi_modal_inputs"][0]
    assert mm["video_grid_thw"].shape[0] == 2  # the initial frames and the crop, in order
    video_tokens = int((mm["video_grid_thw"].prod(dim=1) // 4).sum())
    assert int((out.batch["input_ids"][0] == tokenizer.convert_tokens_to_ids("<|video_pad|>")).sum()) == video_tokens
    assert out.batch["position_ids"].shape == (2, 4, out.batch["input_ids"].shape[1])  # text + 3D M-RoPE

    # extra_fields reached compute_score through verl's reward manager
    assert list(out.non_tensor_batch["acc"]) == [1.0, 1.0]
    assert list(out.non_tensor_batch["calls"]) == [1.0, 1.0] and list(out.non_tensor_batch["valid_format"]) == [1.0, 1.0]
    assert all(c == pytest.approx(1.0) for c in out.non_tensor_batch["coverage"])
    record = out.non_tensor_batch["videoseek"][0]
    assert record["calls"] == [[11.5, 14.0]] and record["episode"]["prediction"] == "B" and record["ended_by"] == "env"
    assert record["reward"] == pytest.approx(float(out.non_tensor_batch["score"][0]))  # the loop and compute_score agree
    assert record["reward_components"]["accuracy"] == 1.0 and record["evidence"]["coverage"] == pytest.approx(1.0)
    last = attention.sum(dim=1) - 1
    scores = out.batch["rm_scores"][torch.arange(2), last]
    assert torch.allclose(scores, torch.tensor(out.non_tensor_batch["score"].astype(np.float32)))
    assert scores[0] > 0
    assert list(out.non_tensor_batch["__num_turns__"]) == [4, 4]  # user, assistant, tool, assistant


def test_the_server_gets_one_placeholder_per_video_and_vllm_expands_it_to_the_training_ids(tmp_path, family_model_dir, exported):
    """For both families: every request the loop sends has exactly one video placeholder per video
    (not the processor's expansion: for Qwen3-VL, vLLM would write each frame pair's `<t seconds>`
    and markers a second time), and vLLM's expansion of it (emulated by the harness server through
    `gpu_probe.vllm_expand_prompt`; only vLLM's expansion is emulated, verl's worker, dedup and
    post-processing are real) is a prefix of the ids verl trains on, the generated turn following it."""
    family, model = family_model_dir
    cfg = make_config(tmp_path, model, exported)
    server = scripted(model, [CROP, ANSWER])
    worker, out = run_worker(cfg, server, n=1)
    assert out.non_tensor_batch["videoseek"][0]["failure"] is None
    trained = out.batch["input_ids"][0][out.batch["attention_mask"][0].bool()].tolist()
    pad = worker.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    assert [r["prompt_ids"].count(pad) for r in server.requests] == [1, 2]  # the sparse frames, then the crop too
    for request in server.requests:
        expanded = request["expanded_ids"]
        assert len(expanded) > len(request["prompt_ids"]) and trained[: len(expanded)] == expanded
    generated = worker.tokenizer.encode(ANSWER, add_special_tokens=False) + [worker.tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert server.requests[-1]["expanded_ids"] + generated == trained
    if family == "qwen3-vl":  # every frame pair's time text is in the trained ids, once
        assert worker.tokenizer.decode(trained).count(" seconds>") == 4 and "seconds>" not in worker.tokenizer.decode(server.requests[-1]["prompt_ids"])


def test_zoom_and_a_custom_tool_through_the_loop(tmp_path, tiny_model, index_sample_module):
    """An env of three tools, the custom one by its file path (examples/custom_tool.py): the prompt
    lists the three schemas, each call's frame is one more video (a one-frame video, as the renderer
    lays out every tool turn), and the record and compute_score count the calls per tool."""
    env = {**ENV, "tools": ["crop_video", "zoom", FRAME_AT_TOOL]}
    parquet = export_samples([index_sample_module], tmp_path / "export", "train", EnvConfig(**env), progress=False)
    cfg = make_config(tmp_path, tiny_model, parquet, env=env, prompt_length=2048, response_length=512)
    server = scripted(tiny_model, [ZOOM, FRAME_AT, ANSWER])
    worker, out = run_worker(cfg, server, n=1)
    record = out.non_tensor_batch["videoseek"][0]
    assert record["failure"] is None and record["ended_by"] == "env" and record["episode"]["prediction"] == "B"
    assert record["tools"] == ["crop_video", "zoom", "frame_at"] and record["tool_calls"] == {"zoom": 1, "frame_at": 1}
    assert record["calls"] == [] and record["episode"]["zooms"] == [[12.5, [0.25, 0.25, 0.75, 0.75]]]
    counts = {k: float(out.non_tensor_batch[k][0]) for k in ("calls", "calls/crop_video", "calls/zoom", "calls/frame_at", "crop_rate")}
    assert counts == {"calls": 2.0, "calls/crop_video": 0.0, "calls/zoom": 1.0, "calls/frame_at": 1.0, "crop_rate": 1.0}
    prompt = worker.tokenizer.decode(server.requests[0]["prompt_ids"])
    assert all(f'"name": "{name}"' in prompt for name in ("crop_video", "zoom", "frame_at"))
    grid = out.non_tensor_batch["multi_modal_inputs"][0]["video_grid_thw"]
    assert grid.shape[0] == 3 and grid[1][0] == 1 and grid[2][0] == 1  # the sparse frames, then one frame per call
    pads = int((out.batch["input_ids"][0] == worker.tokenizer.convert_tokens_to_ids("<|video_pad|>")).sum())
    assert pads == int((grid.prod(dim=1) // 4).sum())
    assert [r["prompt_ids"].count(server.video_pad) for r in server.requests] == [1, 2, 3]


def test_tiny_model_generation_never_breaks_the_worker(tmp_path, tiny_model, exported):
    """A random policy writes anything (special tokens included): the batch still post-processes."""
    cfg = make_config(tmp_path, tiny_model, exported, response_length=160)
    worker, out = run_worker(cfg, TinyModelServer(tiny_model), n=2)
    mask, attention = out.batch["response_mask"], out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :]
    assert bool((mask <= attention).all()) and int(mask.sum()) > 0
    assert out.batch["input_ids"].shape[1] == 1024 + 160
    assert out.batch["position_ids"].shape[1] == 4
    for row in range(2):
        grid = out.non_tensor_batch["multi_modal_inputs"][row]["video_grid_thw"]
        pads = int((out.batch["input_ids"][row] == worker.tokenizer.convert_tokens_to_ids("<|video_pad|>")).sum())
        assert pads == int((grid.prod(dim=1) // 4).sum())
    assert np.isfinite(out.non_tensor_batch["score"].astype(float)).all()


def test_vision_markup_written_by_the_policy_is_cut(tmp_path, tiny_model, exported):
    cfg = make_config(tmp_path, tiny_model, exported)
    server = scripted(tiny_model, ["<think>x</think><|vision_start|><|video_pad|> more"])
    _, out = run_worker(cfg, server, n=1)
    record = out.non_tensor_batch["videoseek"][0]
    assert record["ended_by"] == "vision_token"
    pads_in_response = int((out.batch["responses"][0] == server.video_pad).sum())
    assert pads_in_response == 0


@pytest.mark.parametrize("preset,kind", [("tgrpo", "shuffle"), ("dmgrpo", "mask")])
def test_group_presets_run_the_perturbed_group_inside_the_loop(tmp_path, tiny_model, exported, preset, kind):
    cfg = make_config(tmp_path, tiny_model, exported, reward=preset)
    server = scripted(tiny_model, [CROP, ANSWER])
    _, out = run_worker(cfg, server, n=2)
    assert len(out) == 2  # only the origin trajectories reach the trainer
    assert len(server.requests) == 4 * 2  # 2 origin + G~ = 2 perturbed episodes of two turns were played
    for row in range(2):
        record = out.non_tensor_batch["videoseek"][row]
        assert record["perturbed"] == {kind: 2}
        group_component = {"shuffle": "temporal", "mask": "delta_mask"}[kind]
        assert group_component in record["group_components"]
        assert out.non_tensor_batch["score"][row] == pytest.approx(record["group_reward"])
    if preset == "tgrpo":  # every answer is right: p = p~ = 1 >= mu * p~, so each origin gets alpha
        assert [r["group_components"]["temporal"] for r in out.non_tensor_batch["videoseek"]] == [0.3, 0.3]


def test_processthinker_samples_continuations_per_step_prefix(tmp_path, tiny_model, exported):
    cfg = make_config(tmp_path, tiny_model, exported, reward="processthinker")

    stepped = "<think><step>The flash is at 12.5s.</step><step>It is green.</step></think><answer>B</answer>"
    server = scripted(tiny_model, [stepped])
    _, out = run_worker(cfg, server, n=1)
    record = out.non_tensor_batch["videoseek"][0]
    assert record["episode"]["metadata"]["success_rates"] == [1.0, 1.0]
    assert len(server.requests) == 1 + 2 * 4  # the episode, then M = 4 continuations for each of K = 2 prefixes
    # r = (r_fmt + beta) + lambda_proc * R_proc + B(K) = 1 + 1 + 0 with K = K_min = 2 (seed 004 eq. 6)
    assert out.non_tensor_batch["score"][0] == pytest.approx(2.0)


@pytest.mark.parametrize("question", ["What does <video> show?", "Is <|video_pad|> a token?", "After <|im_end|><|im_start|>user, what?"])
def test_markup_in_a_question_stays_text(tmp_path, tiny_model, index_video, question):
    """verl's dataset splits prompts on `<video>` and processors expand `<|video_pad|>`: a question that
    mentions them is exported and rendered as text, with one placeholder per real video."""
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from videoseek.envs.sample import VideoSample

    sample = VideoSample(id="markup", video=str(index_video), question=question, options=["A. x", "B. y"], answer="B", clue_intervals=[(12.0, 13.5)])
    parquet = export_samples([sample], tmp_path / "export", "train", EnvConfig(**ENV), progress=False)
    cfg = make_config(tmp_path, tiny_model, parquet)
    row = RLHFDataset([str(parquet)], hf_tokenizer(str(tiny_model)), cfg.data, hf_processor(str(tiny_model)))[0]
    assert question.replace("<", "<\u200b") in row["raw_prompt"][1]["content"][-1]["text"]
    server = scripted(tiny_model, [CROP, ANSWER])  # it asserts one placeholder run per video
    _, out = run_worker(cfg, server, n=1)
    record = out.non_tensor_batch["videoseek"][0]
    assert record["failure"] is None and record["episode"]["prediction"] == "B"


def test_an_episode_dump_that_cannot_be_written_warns_once_and_goes_on(tmp_path, caplog):
    import json

    from omegaconf import OmegaConf

    from videoseek.training.verl_plugin.episode_dump import EpisodeDump, dump_dir

    assert dump_dir(OmegaConf.create({"trainer": {"rollout_data_dir": str(tmp_path), "use_v1": True}})) == tmp_path / "videoseek"
    assert dump_dir(OmegaConf.create({"trainer": {"rollout_data_dir": str(tmp_path), "use_v1": False}})) is None  # legacy dumps carry it
    assert dump_dir(OmegaConf.create({"trainer": {"rollout_data_dir": None}})) is None
    (tmp_path / "file").write_text("")
    dump = EpisodeDump(tmp_path / "file" / "videoseek")  # a folder under a file: every write fails
    with caplog.at_level("WARNING", logger="videoseek.training.verl_plugin.episode_dump"):
        dump.write("u_0_0", 3, 1.0, "{}")
        dump.write("u_1_0", 3, 0.0, "{}")
    assert len(caplog.records) == 1 and "cannot write the episode dump" in caplog.records[0].getMessage()
    good = EpisodeDump(tmp_path / "videoseek")
    good.write("u_0_0", 3, 1.0, '{"sample": {}}')
    good.write("u_1_0", 3.0, 0.0, "{}")
    lines = [json.loads(x) for x in good.path(3).read_text().splitlines()]
    assert [(x["key"], x["step"], x["acc"]) for x in lines] == [("u_0_0", 3, 1.0), ("u_1_0", 3, 0.0)]
