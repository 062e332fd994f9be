"""One episode engine: `run_rollouts` (the local backend's driver) and verl's v1 `AgentLoopWorkerTQ`
(through `VideoSeekAgentLoop`) play the same episodes.

The same samples, run seed and training step, and one deterministic policy on both paths: it
crops a window chosen by the turn's sampling seed (`agents.groups.turn_seed`, which the agent loop
sends to the server and the local policy derives from the episode) and answers from the pixels of
the latest frames it was shown. On verl the policy is the emulated server (`FakeVLLMServer`'s
`respond`); everything else is verl's real v1 worker, trainer step and reward path
(`verl_harness.py`). The policy writes token ids as a model would (its text's ids and
`<|im_end|>`), so the local side's training tokens can be compared with verl's.

Equal, for every preset (group presets with their perturbed groups): every episode's trajectory,
perturbed ones included (the agent loop's episode dump against `run_rollouts`' records: turns,
frame times and masks, tool answers, evidence, prediction, reward and components), the records
verl trains from (group indices, crops, evidence, group rewards), GRPO advantages, and the token
ids and loss / response masks training sees.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("transfer_queue")

from verl.utils import hf_processor
from verl_harness import ENV, InMemoryTransferQueue, V1Run, make_config
from videoseek.agents.groups import episode_seed, turn_seed
from videoseek.agents.policy import PolicyOutput
from videoseek.agents.prompting import ConversationRenderer
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.tiny_model import ensure_tiny_model
from videoseek.envs.env import EnvConfig
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import Trajectory
from videoseek.rewards import PRESETS, RewardConfig
from videoseek.training.exports.verl_parquet import export_samples
from videoseek.training.local_backend.rollout import RecordingPolicy, training_batch

SEED = 7
STEP = 1  # verl's first training step (`global_steps` starts at 1)
GROUP = 2
PIXELS = {"min_pixels": 28 * 28, "max_pixels": 56 * 56}
WINDOWS = [(11.5, 14.0), (2.0, 6.0), (12.0, 13.0)]


def decide(turn: int, seed: int, frames: np.ndarray) -> str:
    """The deterministic policy: a seeded crop first, then an answer read from the pixels."""
    if turn == 0:
        s, e = WINDOWS[seed % len(WINDOWS)]
        return f'<think>Look closer.</think><tool_call>{{"name": "crop_video", "arguments": {{"start": {s}, "end": {e}}}}}</tool_call>'
    letter = "ABCD"[int(np.asarray(frames, dtype=np.float64).mean()) % 4]
    # two ProcessThinker steps, so its continuations are sampled from each step prefix
    return f"<think><step>Ref: the frames at 00:00:12.</step><step>Delta: the brightness.</step></think><answer>{letter}</answer>"


class PixelPolicy:
    """`decide` for `run_rollouts`, with the token ids a model writing that text would have."""

    name = "pixel"

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def act(self, batch):
        out = []
        for item in batch:
            seed = turn_seed(episode_seed(SEED, STEP, item.episode_id), item.turn)
            frames = next(m.frames for m in reversed(item.messages) if m.frames is not None)
            text = decide(item.turn, seed, frames)
            out.append(PolicyOutput(text, token_ids=self.tokenizer.encode(text, add_special_tokens=False) + [self.end_id]))
        return out


def make_respond(tokenizer):
    """`decide` as the emulated vLLM server: the turn from the prompt, the seed from the request."""
    assistant = tokenizer.encode("<|im_start|>assistant", add_special_tokens=False)

    def respond(prompt_ids, video_data, sampling_params):
        n = len(assistant)
        turn = sum(1 for k in range(len(prompt_ids) - n + 1) if prompt_ids[k : k + n] == assistant) - 1  # minus the generation prompt
        frames = video_data[-1][0] if isinstance(video_data[-1], tuple) else video_data[-1]
        frames = frames.numpy() if isinstance(frames, torch.Tensor) else frames
        return decide(turn, int(sampling_params["seed"]), frames)

    return respond


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return ensure_tiny_model(cache_dir=tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def samples(index_video):
    base = VideoSample(
        id="eq-1", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green", "C. blue", "D. yellow"],
        answer="B", clue_intervals=[(12.0, 13.5)], reference_reasoning="<think>Ref: at 00:00:01 nothing. Delta: at 00:00:12 green.</think>",
        mask_patterns=[{"time_range": (3.0, 4.0), "oracle_correct": True}, {"time_range": (12.0, 13.5), "oracle_correct": False},
                       {"time_range": (8.0, 10.0), "oracle_correct": True}],
    )  # fmt: skip
    return [base, base.model_copy(update={"id": "eq-2", "question": "Which colour flashes in the video?", "answer": "C"})]


@pytest.fixture
def store(monkeypatch):
    return InMemoryTransferQueue().install(monkeypatch)


def local_episodes(samples, preset, model):
    """The local backend's step: `run_rollouts` at (SEED, STEP), then the batch it would train on."""
    processor = hf_processor(str(model))
    recorder = RecordingPolicy(PixelPolicy(processor.tokenizer))
    config = EnvConfig(**ENV, reward=RewardConfig(preset=preset))
    trajs = run_rollouts(samples, recorder, group_size=GROUP, env_config=config, seed=SEED, step=STEP, progress=False)
    renderer = ConversationRenderer(processor, mode="video", **PIXELS)
    return trajs, training_batch(trajs, recorder, renderer)


def verl_episodes(tmp_path, samples, preset, model):
    """verl's v1 worker and trainer, one step, on the same samples (one batch holds both questions)."""
    parquet = export_samples(samples, tmp_path / "export", "train", EnvConfig(**ENV), progress=False)
    cfg = make_config(tmp_path, model, parquet, reward=preset, group_size=GROUP, batch_size=len(samples),
                      loop={**PIXELS, "seed": SEED})  # fmt: skip
    run = V1Run(cfg, model, respond=make_respond(hf_processor(str(model)).tokenizer))
    try:
        batch, _, stored = run.step()
    finally:
        run.close()
    # the agent loop's episode dump: the env's trajectory of every episode it played, perturbed ones too
    dumped = {}
    for f in sorted((tmp_path / "run" / "rollouts" / "videoseek").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            traj = Trajectory.model_validate(json.loads(line)["trajectory"])
            dumped[traj.episode_id] = traj
    return batch, stored, dumped


def verl_record(stored, episode_id: str) -> dict:
    return next(ef["videoseek"] for ef in list(stored["extra_fields"]) if ef["videoseek"]["episode_id"] == episode_id)


def episode_facts(traj: Trajectory) -> dict:
    """What an episode was: its group, turns, frames shown, evidence and score (not who played it)."""
    return {
        "group": traj.group.model_dump(), "initial": [f.t for f in traj.initial.frames],
        "turns": [(t.assistant, t.action, t.error, t.observation.text, [f.t for f in t.observation.frames],
                   [f.masked for f in t.observation.frames], t.evidence, t.call.model_dump() if t.call else None) for t in traj.turns],
        "prediction": traj.prediction, "accuracy": traj.accuracy, "terminated": traj.terminated, "truncated": traj.truncated,
    }  # fmt: skip


@pytest.mark.parametrize("preset", list(PRESETS))
def test_run_rollouts_and_verl_v1_play_identical_episodes(tmp_path, tiny_model, samples, store, preset):
    trajs, local = local_episodes(samples, preset, tiny_model)
    batch, stored, dumped = verl_episodes(tmp_path, samples, preset, tiny_model)
    # Every episode, origin and perturbed, played the same: texts, frames (times, masks), evidence, score.
    assert sorted(dumped) == sorted(t.episode_id for t in trajs)
    for t in trajs:
        assert episode_facts(dumped[t.episode_id]) == episode_facts(t), t.episode_id
        assert dumped[t.episode_id].reward == pytest.approx(t.reward) and dumped[t.episode_id].reward_components == pytest.approx(t.reward_components)
    if preset in ("dmgrpo", "tgrpo", "sfgrpo"):
        assert any(t.group.role == "perturbed" for t in trajs)
    if preset == "processthinker":  # c_i from the sampled continuations, the same on both paths
        assert all(t.metrics.get("success_rates") for t in trajs)
        for t in trajs:
            rec = verl_record(stored, t.episode_id)
            assert rec["episode"]["metadata"]["success_rates"] == t.metrics["success_rates"] == dumped[t.episode_id].metrics["success_rates"]
    records = [ef["videoseek"] for ef in list(stored["extra_fields"])]
    verl_by_id = {}
    for k, rec in enumerate(records):
        mask = stored["response_mask"][k].bool()
        verl_by_id[rec["episode_id"]] = (k, rec, float(stored["advantages"][k][mask][0]))

    origin = [t for t in trajs if t.group.role == "origin"]
    assert sorted(verl_by_id) == sorted(t.episode_id for t in origin)  # same episodes, same ids
    rewards = set()
    for t in origin:
        k, rec, advantage = verl_by_id[t.episode_id]
        assert rec["group_index"] == t.group.index
        assert rec["calls"] == [[c.start, c.end] for c in t.calls]
        assert {k: v for k, v in rec["evidence"].items() if k in t.turns[-1].evidence} == pytest.approx({k: v for k, v in t.turns[-1].evidence.items() if v is not None})
        # the local trajectory holds the final (group) reward; verl's record the episode's and the group's
        final, components = (rec["group_reward"], rec["group_components"]) if rec["group_reward"] is not None else (rec["reward"], rec["reward_components"])
        assert final == pytest.approx(t.reward) and components == pytest.approx(t.reward_components)
        assert advantage == pytest.approx(t.advantage, abs=1e-4)
        rewards.add(round(t.reward, 6))
        if rec.get("perturbed") is not None:
            played = {kind: sum(1 for p in trajs if p.group.id == t.group.id and p.group.perturbation and p.group.perturbation["kind"] == kind)
                      for kind in rec["perturbed"]}  # fmt: skip
            assert rec["perturbed"] == played

    assert len(rewards) > 1, "the policy should give the groups different rewards (else advantages are all 0)"
    # What training sees: the same token ids, and the loss mask on exactly verl's response mask.
    for t, ep in zip(local.trajectories, local.episodes):
        k = verl_by_id[t.episode_id][0]
        prompt, response, response_mask = stored["prompts"][k], stored["responses"][k], stored["response_mask"][k]
        n = len(prompt) + len(response)
        assert ep.input_ids[: len(prompt)].tolist() == prompt.tolist()
        assert ep.input_ids[len(prompt) : n].tolist() == response.tolist()
        assert ep.loss_mask[len(prompt) : n].tolist() == response_mask.tolist() and int(ep.loss_mask[: len(prompt)].sum()) == 0
        # after the last <|im_end|> the local rendering keeps the template's closing newline, never trained on
        assert ep.input_ids[n:].tolist() in ([], [198]) and int(ep.loss_mask[n:].sum()) == 0


@pytest.mark.slow
def test_the_tiny_model_greedy_plays_the_same_tokens_on_both_paths(tmp_path, family_model_dir, samples, store):
    """A real model: the tiny VLM of each family, greedy, generating locally (`TransformersPolicy`)
    and behind the emulated vLLM server (the same model, from the ids and frames verl sends)."""
    from test_training_agent_loop import TinyModelServer
    from videoseek.agents.hf_policy import TransformersPolicy

    _, model = family_model_dir
    max_turn_tokens = 64  # make_config's cap of one assistant turn
    policy = TransformersPolicy(model, max_new_tokens=max_turn_tokens, temperature=0.0, **PIXELS)
    recorder = RecordingPolicy(policy)
    config = EnvConfig(**ENV, reward=RewardConfig(preset="csgrpo"))
    trajs = run_rollouts(samples, recorder, group_size=GROUP, env_config=config, seed=SEED, step=STEP, progress=False, batch_episodes=1)
    local = training_batch(trajs, recorder, policy.renderer)

    parquet = export_samples(samples, tmp_path / "export", "train", EnvConfig(**ENV), progress=False)
    # a response budget no episode reaches: the local driver has none (a turn the budget cuts is verl's alone)
    cfg = make_config(tmp_path, model, parquet, reward="csgrpo", group_size=GROUP, batch_size=len(samples), response_length=4096,
                      loop={**PIXELS, "seed": SEED})  # fmt: skip
    run = V1Run(cfg, model, server=TinyModelServer(model, do_sample=False))
    try:
        _, _, stored = run.step()
    finally:
        run.close()
    by_id = {ef["videoseek"]["episode_id"]: k for k, ef in enumerate(list(stored["extra_fields"]))}
    assert sorted(by_id) == sorted(t.episode_id for t in local.trajectories)
    for t, ep in zip(local.trajectories, local.episodes):
        k = by_id[t.episode_id]
        prompt, response, response_mask = stored["prompts"][k], stored["responses"][k], stored["response_mask"][k]
        n = len(prompt) + len(response)
        assert ep.input_ids[:n].tolist() == prompt.tolist() + response.tolist(), t.episode_id
        assert ep.loss_mask[len(prompt) : n].tolist() == response_mask.tolist()
        rec = list(stored["extra_fields"])[k]["videoseek"]
        assert int(ep.loss_mask[n:].sum()) == 0, (rec["ended_by"], len(response))
        assert rec["reward"] == pytest.approx(t.reward) and rec["reward_components"] == pytest.approx(t.reward_components)
