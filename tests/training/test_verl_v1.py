"""`VideoSeekAgentLoop` on verl's default v1 path: `AgentLoopWorkerTQ` and `PPOTrainerSync.step`.

verl 0.9.1 trains with `trainer.use_v1: true`: the v1 agent-loop worker runs all `rollout.n`
sessions of a prompt, post-processes each into TransferQueue with tags the trainer reads
(`min_global_steps` / `max_global_steps`), and the v1 trainer samples finished groups from its
replay buffer, balances the batch, computes log-probs, advantages (our `videoseek_grpo`) and
metrics. These tests run that code for real, two steps; only CUDA and cluster pieces (the vLLM
server, Ray's transport, TransferQueue's storage actors, the FSDP actor) are emulated, as
`verl_harness.py` describes.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

from verl_harness import ANSWER, CROP, ENV, InMemoryTransferQueue, V1Run, make_config
from videoseek.agents.tiny_model import ensure_tiny_model
from videoseek.envs.env import EnvConfig
from videoseek.envs.sample import VideoSample
from videoseek.training.exports.verl_parquet import export_samples

WRONG = "<think>No need to look.</think><answer>A</answer>"
MARKUP = "<|vision_start|><|video_pad|><think>x</think>"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return ensure_tiny_model(cache_dir=tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory, index_video):
    sample = VideoSample(
        id="idx-1", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green", "C. blue", "D. yellow"],
        answer="B", clue_intervals=[(12.0, 13.5)],
    )  # fmt: skip
    other = sample.model_copy(update={"id": "idx-2", "question": "Which colour flashes in the video?"})  # prompts differ per question
    return export_samples([sample, other], tmp_path_factory.mktemp("export"), "train", EnvConfig(**ENV), progress=False)


@pytest.fixture
def store(monkeypatch):
    return InMemoryTransferQueue().install(monkeypatch)


def records(stored):
    return [ef["videoseek"] for ef in list(stored["extra_fields"])]


def test_two_trainer_steps_carry_server_fields_positions_and_advantages(tmp_path, tiny_model, exported, store):
    # One conversation kind crops then answers right, the other answers wrong at once: the groups have signal.
    cfg = make_config(tmp_path, tiny_model, exported, group_size=2, batch_size=2, loop={"min_pixels": 28 * 28, "max_pixels": 56 * 56})
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER], [WRONG]])
    try:
        for step in (1, 2):
            batch, metrics, stored = run.step()
            assert len(batch) == 4  # two questions x G = 2, nothing dropped
            # 1. the server's extra fields survive the loop: tags are ints, the trainer's staleness metrics exist
            assert [t["min_global_steps"] for t in batch.tags] == [step - 1] * 4
            assert [t["max_global_steps"] for t in batch.tags] == [step - 1] * 4
            assert metrics["training/off_policy/trajectory_staleness/max"] == 0
            assert metrics["training/off_policy/trajectory_spans/max"] == 1
            assert metrics["training/num_turns/max"] == 4 and metrics["training/num_turns/min"] == 2
            # 2. rewards and `videoseek_grpo` advantages: within each question's group the right answer is ahead
            by_uid = {}
            for key, rec, adv, mask in zip(batch.keys, records(stored), stored["advantages"].unbind(), stored["response_mask"].unbind()):
                by_uid.setdefault(key.split("_")[0], []).append((rec["reward_components"]["accuracy"], float(adv[mask.bool()][0])))
            for group in by_uid.values():
                (acc_a, adv_a), (acc_b, adv_b) = sorted(group, reverse=True)
                assert (acc_a, acc_b) == (1.0, 0.0) and adv_a > 0 > adv_b
            assert run.actor.updates[-1]["keys"] == batch.keys  # the actor update saw this batch
        # 3. vLLM got the training processor's resize (the server checks its own expansion against the prompt)
        assert all(r["mm_processor_kwargs"] == {"size": {"shortest_edge": 28 * 28, "longest_edge": 56 * 56}} for r in run.server.requests)
        assert metrics["actor/entropy"] > 0  # log-probs and entropies of a real forward on what verl stored
    finally:
        run.close()


def test_qwen3_vl_positions_and_clip_times_through_the_v1_worker(tmp_path, tiny_qwen3_model_dir, exported, store):
    """Qwen3-VL: the positions verl stores equal those `Qwen3VLModel` computes in its own forward for the
    same ids and grids, and each clip's `<t seconds>` texts are its frames' real times, inside the crop."""
    import re

    from transformers import AutoModelForImageTextToText

    cfg = make_config(tmp_path, tiny_qwen3_model_dir, exported, group_size=2, batch_size=2)
    run = V1Run(cfg, tiny_qwen3_model_dir, scripts=[[CROP, ANSWER]])
    try:
        _, _, stored = run.step()
    finally:
        run.close()
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen3_model_dir)
    video_pad = run.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    for ids, positions, mm, response in zip(stored["input_ids"].unbind(), stored["position_ids"].unbind(), list(stored["multi_modal_inputs"]), stored["responses"].unbind()):
        ids = ids[None]
        forward, _ = model.model.get_rope_index(ids, (ids == video_pad).long() * 2, video_grid_thw=mm["video_grid_thw"], attention_mask=torch.ones_like(ids))
        assert torch.equal(positions[1:], forward[:, 0])
        tool = run.tokenizer.decode(response, skip_special_tokens=False).split("<tool_response>", 1)[1]
        frame_times = [float(t) for t in re.search(r"Frames at ([^:]*):", tool).group(1).replace("s", "").split(", ")]
        clip_times = [float(t) for t in re.findall(r"<([0-9.]+) seconds>", tool)]
        # The processor labels each frame pair with its mean time, to 0.1 s: the crop's real frame times.
        assert len(frame_times) == 4 and all(11.5 <= t <= 14.0 for t in frame_times)
        assert clip_times == [float(f"{(a + b) / 2:.1f}") for a, b in zip(frame_times[::2], frame_times[1::2])]


def test_positions_verl_stores_equal_the_forward_and_vllms_rule(tmp_path, tiny_model, exported, store):
    """Sparse frames 5 s apart and a clip at another rate: the M-RoPE ids verl stores for training equal
    the HF forward's (`TransformersPolicy`'s model) and vLLM's rule (an independent re-implementation,
    checked against real vLLM by training/gpu_probe.py); stock verl + transformers 5.10 give others."""
    from transformers import AutoModelForImageTextToText
    from videoseek.agents.rope import use_sampling_rope_index
    from videoseek.training.gpu_probe import vllm_rule_positions

    cfg = make_config(tmp_path, tiny_model, exported, group_size=2, batch_size=2)
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER]])
    try:
        _, _, stored = run.step()
    finally:
        run.close()
    model = AutoModelForImageTextToText.from_pretrained(tiny_model)
    stock = type(model.model).get_rope_index
    assert use_sampling_rope_index(model)
    vision = model.config.vision_config
    video_pad = run.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    for ids, positions, mm in zip(stored["input_ids"].unbind(), stored["position_ids"].unbind(), list(stored["multi_modal_inputs"])):
        assert mm["video_grid_thw"].shape[0] == 2  # initial frames and the crop
        assert mm["second_per_grid_ts"].tolist()[0] != 1.0  # a rate where the default would be wrong
        ids = ids[None]
        inputs = dict(video_grid_thw=mm["video_grid_thw"], second_per_grid_ts=mm["second_per_grid_ts"], attention_mask=torch.ones_like(ids))
        forward, _ = model.model.get_rope_index(ids, (ids == video_pad).long() * 2, **inputs)
        assert torch.equal(positions[1:], forward[:, 0])
        rule = vllm_rule_positions(ids, video_pad, mm["video_grid_thw"], mm["second_per_grid_ts"], vision.tokens_per_second, vision.spatial_merge_size)
        assert torch.equal(positions[1:], rule)
        unfixed, _ = stock(model.model, ids, (ids == video_pad).long() * 2, video_grid_thw=mm["video_grid_thw"], attention_mask=torch.ones_like(ids))
        assert not torch.equal(positions[1:], unfixed[:, 0])


def test_failures_keep_the_group_and_train_on(tmp_path, tiny_model, exported, store):
    """Vision markup as the first token, and a server error before any token: each session still returns
    one (masked) token, the group is `finished`, not lost, and the trainer's step runs."""
    cfg = make_config(tmp_path, tiny_model, exported, group_size=4, batch_size=1, overrides={"data.train_batch_size": 1})
    scripts = [[CROP, ANSWER], [WRONG], [MARKUP], [RuntimeError("engine died")]]
    run = V1Run(cfg, tiny_model, scripts=scripts)
    try:
        batch, metrics, stored = run.step()
    finally:
        run.close()
    assert len(batch) == 4
    recs = {r["ended_by"]: (r, mask, resp) for r, mask, resp in zip(records(stored), stored["response_mask"].unbind(), stored["responses"].unbind())}
    markup, mask, resp = recs["vision_token"]
    assert resp.tolist() == [run.tokenizer.convert_tokens_to_ids("<|im_end|>")] and mask.tolist() == [0]
    assert markup["episode"]["invalid_calls"] == 1 and markup["reward_components"]["accuracy"] == 0.0  # scored as an invalid turn
    failed, mask, resp = recs["failure"]
    assert "engine died" in failed["failure"] and mask.tolist() == [0] and len(resp) == 1
    assert all(float(a.abs().sum()) == 0 for a, r in zip(stored["advantages"].unbind(), records(stored)) if r["ended_by"] in ("failure", "vision_token"))
    group_statuses = [tag["status"] for _, key, tag in store.tag_history if "_" not in key and "status" in tag]
    assert group_statuses == ["pending", "running", "finished"]  # not "failure": no session raised
    assert metrics["training/num_turns/min"] == 1  # the failed session: only its user turn


def test_absent_server_logprobs_stay_absent(tmp_path, tiny_model, exported, store):
    """`calculate_log_probs=false`: the server sends none, and the loop invents none (verl recomputes)."""
    cfg = make_config(tmp_path, tiny_model, exported, group_size=2, batch_size=2, overrides={"actor_rollout_ref.rollout.calculate_log_probs": False})
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER]])
    try:
        run.step()
    finally:
        run.close()
    assert "rollout_log_probs" not in run.field_names and "old_log_probs" in run.field_names


def test_a_prompt_whose_video_fails_is_replaced_not_fatal(tmp_path, tiny_model, index_video, store):
    """Every session of the first prompt raises at reset (its video is gone): verl's sync replay buffer
    would raise for a group without trajectories; with `sync_refill_failed_groups` (set by
    `verl_overrides`) the trainer fetches the next prompt and the step trains on it."""
    import shutil

    doomed = tmp_path / "doomed.mp4"
    shutil.copy(index_video, doomed)
    base = dict(question="Which colour flashes?", options=["A. red", "B. green", "C. blue", "D. yellow"], answer="B", clue_intervals=[(12.0, 13.5)])
    rows = [VideoSample(id="bad", video=str(doomed), **base), VideoSample(id="good", video=str(index_video), **base)]
    parquet = export_samples(rows, tmp_path / "export", "train", EnvConfig(**ENV), progress=False)
    doomed.unlink()
    cfg = make_config(tmp_path, tiny_model, parquet, group_size=2, batch_size=1)
    cfg.data.shuffle = False
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER], [WRONG]])
    try:
        batch, _, stored = run.step()
    finally:
        run.close()
    assert len(batch) == 2 and {r["sample_id"] for r in records(stored)} == {"good"}
    assert ("train", "failure") in {(p, t.get("status")) for p, _, t in store.tag_history}  # the bad prompt's group failed


def test_val_only_evaluation_through_verl_is_scored_by_videoseek_eval(tmp_path, tiny_model, index_video, store):
    """The benchmark path past one GPU: verl's own `fit()` with `trainer.val_only` (the overrides
    of the `eval_qwen25vl_7b_8gpu` ready config), two validation batches, then `videoseek eval` on
    the run folder reads the agent loop's episode dump."""
    import json

    import yaml
    from videoseek.cli import main
    from videoseek.training.verl_plugin.config import CONFIGS_DIR

    base = VideoSample(
        id="ev-1", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green", "C. blue", "D. yellow"],
        answer="B", clue_intervals=[(12.0, 13.5)],
    )  # fmt: skip
    samples = [base, base.model_copy(update={"id": "ev-2", "question": "Which colour flashes in the video?", "answer": "C"})]
    parquet = export_samples(samples, tmp_path / "export", "train", EnvConfig(**ENV), progress=False)
    ready = yaml.safe_load((CONFIGS_DIR / "eval_qwen25vl_7b_8gpu.yaml").read_text())["overrides"]
    evaluation = {k: v for k, v in ready.items() if k.startswith(("trainer.val", "actor_rollout_ref.rollout.val_kwargs"))}
    cfg = make_config(tmp_path, tiny_model, parquet, group_size=1, batch_size=1, overrides={**evaluation, "data.val_batch_size": 1})
    run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER]])
    try:
        run.trainer._init_dump_executor()  # what PPOTrainer.__init__ does (the harness builds the trainer without it)
        run.trainer.fit(run.trainer.agent_loop_manager)  # validates once and returns (val_only)
    finally:
        run.close()
    assert run.trainer.global_steps == 0 and not run.actor.updates  # no training step
    assert len([r for r in run.server.requests if r["max_tokens"]]) == 4  # 2 questions (2 batches of 1) x 2 turns

    out = tmp_path / "run" / "metrics.json"
    assert main(["eval", str(tmp_path / "run")]) == 0
    metrics = json.loads(out.read_text())
    assert metrics["episodes"] == 2 and metrics["accuracy"] == 0.5 and metrics["crop_rate"] == 1.0  # B is right for ev-1 only
    assert main(["eval", str(tmp_path / "run"), "--step", "7"]) == 2  # no episodes at that step: one-line error
