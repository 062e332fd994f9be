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

The same with an env of two tools, `crop_video` and `zoom` (`EnvConfig.tools`): a policy that
crops, zooms into a seeded box and answers from the zoomed pixels, and the tiny model of each
family, which answers after a scripted crop and zoom, greedily, from what it was shown - on verl
the zoomed frame is one more video in `multi_modal_data`, as in the local rendering.
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
TWO_TOOLS = ["crop_video", "zoom"]
BOXES = [[0.25, 0.25, 0.75, 0.75], [0.4, 0.1, 1.2, 0.9], [0.0, 0.0, 0.5, 0.5]]  # the second is clipped to the frame
KEY_BOX = BOXES[0]  # the samples' key-frame box: a zoom on it earns the clue-seek zoom credit


def crop(s: float, e: float) -> str:
    return f'<think>Look closer.</think><tool_call>{{"name": "crop_video", "arguments": {{"start": {s}, "end": {e}}}}}</tool_call>'


def zoom(time: float, box: list[float]) -> str:
    return f'<think>Closer still.</think><tool_call>{{"name": "zoom", "arguments": {{"time": {time}, "box": {box}}}}}</tool_call>'


def pixel_answer(frames: np.ndarray) -> str:
    letter = "ABCD"[int(np.asarray(frames, dtype=np.float64).mean()) % 4]
    # two ProcessThinker steps, so its continuations are sampled from each step prefix
    return f"<think><step>Ref: the frames at 00:00:12.</step><step>Delta: the brightness.</step></think><answer>{letter}</answer>"


def decide(turn: int, seed: int, frames: np.ndarray) -> str:
    """The deterministic policy: a seeded crop first, then an answer read from the pixels."""
    if turn == 0:
        return crop(*WINDOWS[seed % len(WINDOWS)])
    return pixel_answer(frames)


def decide_zoom(turn: int, seed: int, frames: np.ndarray) -> str:
    """The deterministic policy with two tools: a seeded crop, a zoom at a seeded window's middle into
    that window's box (the first window's is the key-frame box; its frame may be masked), then an
    answer read from the zoomed pixels."""
    if turn == 0:
        return crop(*WINDOWS[seed % len(WINDOWS)])
    if turn == 1:
        s, e = WINDOWS[seed % len(WINDOWS)]
        return zoom((s + e) / 2, BOXES[seed % len(WINDOWS)])
    return pixel_answer(frames)


class PixelPolicy:
    """`decide` (or another policy of that signature) for `run_rollouts`, with the token ids a model
    writing that text would have."""

    name = "pixel"

    def __init__(self, tokenizer, decide=decide) -> None:
        self.tokenizer = tokenizer
        self.decide = decide
        self.end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def act(self, batch):
        out = []
        for item in batch:
            seed = turn_seed(episode_seed(SEED, STEP, item.episode_id), item.turn)
            frames = next(m.frames for m in reversed(item.messages) if m.frames is not None)
            text = self.decide(item.turn, seed, frames)
            out.append(PolicyOutput(text, token_ids=self.tokenizer.encode(text, add_special_tokens=False) + [self.end_id]))
        return out


def assistant_turns(tokenizer, prompt_ids) -> int:
    """The assistant turns a prompt already holds (its generation prompt not counted)."""
    assistant = tokenizer.encode("<|im_start|>assistant", add_special_tokens=False)
    n = len(assistant)
    return sum(1 for k in range(len(prompt_ids) - n + 1) if prompt_ids[k : k + n] == assistant) - 1


def make_respond(tokenizer, decide=decide):
    """`decide` as the emulated vLLM server: the turn from the prompt, the seed from the request."""

    def respond(prompt_ids, video_data, sampling_params):
        frames = video_data[-1][0] if isinstance(video_data[-1], tuple) else video_data[-1]
        frames = frames.numpy() if isinstance(frames, torch.Tensor) else frames
        return decide(assistant_turns(tokenizer, prompt_ids), int(sampling_params["seed"]), frames)

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


@pytest.fixture(scope="module")
def zoom_samples(samples):
    """The samples with a key-frame box at the flash, for the zoom's spatial evidence and credit."""
    return [VideoSample.model_validate({**s.model_dump(), "key_frames": [{"time": 12.5, "boxes": {"flash": KEY_BOX}}]}) for s in samples]


@pytest.fixture
def store(monkeypatch):
    return InMemoryTransferQueue().install(monkeypatch)


def decide_look_on(turn: int, seed: int, frames: np.ndarray) -> str:
    """Two seeded crops (the first window holds the clue: a useful call; the second misses), then an
    answer: the turns of one episode earn different turn rewards, and episodes differ in them."""
    if turn < 2:
        return crop(*WINDOWS[(seed + turn) % len(WINDOWS)])
    return pixel_answer(frames)


def decide_over_turn(turn: int, seed: int, frames: np.ndarray) -> str:
    """`decide_look_on`, but every episode whose third turn's seed is odd crops once more instead of answering."""
    if turn == 2 and seed % 2:
        return crop(*WINDOWS[seed % len(WINDOWS)])
    return decide_look_on(turn, seed, frames)


def decide_after_misses(turn: int, seed: int, frames: np.ndarray) -> str:
    """For episodes that start in the look-on state (two forced crops that missed): on an even seed look
    on at the flash's window, on an odd one answer at once; after looking on, answer."""
    if turn == 2 and seed % 2 == 0:
        return crop(*WINDOWS[0])
    return pixel_answer(frames)


def decide_after_first(turn: int, seed: int, frames: np.ndarray) -> str:
    """After the forced first-window crop: on an even seed look on at the flash's window, else answer."""
    if turn == 1 and seed % 2 == 0:
        return crop(*WINDOWS[0])
    return pixel_answer(frames)


def local_episodes(samples, preset, model, env=ENV, decide=decide, initial_frames=(), look_on_share=0.0, reward_params=None,
                   look_on_starts=("two_misses",)):  # fmt: skip
    """The local backend's step: `run_rollouts` at (SEED, STEP), then the batch it would train on."""
    processor = hf_processor(str(model))
    recorder = RecordingPolicy(PixelPolicy(processor.tokenizer, decide))
    config = EnvConfig(**env, reward=RewardConfig(preset=preset, **(reward_params or {})))
    trajs = run_rollouts(samples, recorder, group_size=GROUP, env_config=config, seed=SEED, step=STEP, progress=False,
                         initial_frames=initial_frames, look_on_share=look_on_share, look_on_starts=look_on_starts)  # fmt: skip
    renderer = ConversationRenderer(processor, mode="video", tools=config.tools, **PIXELS)
    return trajs, training_batch(trajs, recorder, renderer, reward_config=config.reward)


def verl_episodes(tmp_path, samples, preset, model, env=ENV, decide=decide, server=None, response_length=256, loop=None, overrides=None, group_size=GROUP,
                  reward_params=None):  # fmt: skip
    """verl's v1 worker and trainer, one step, on the same samples (one batch holds both questions)."""
    parquet = export_samples(samples, tmp_path / "export", "train", EnvConfig(**env), progress=False)
    cfg = make_config(tmp_path, model, parquet, reward=preset, group_size=group_size, batch_size=len(samples), response_length=response_length,
                      loop={**PIXELS, "seed": SEED, **(loop or {})}, env=env, overrides=overrides, reward_params=reward_params)  # fmt: skip
    run = V1Run(cfg, model, respond=None if server else make_respond(hf_processor(str(model)).tokenizer, decide), server=server)
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


def assert_same_episodes(trajs, local, stored, dumped, preset, varied=True):
    """Both paths played the same episodes, scored them alike, and train on the same tokens (the module
    docstring); `varied`: the groups' rewards differ (advantages are not all 0)."""
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
        assert rec["calls"] == [[c.start, c.end] for c in t.calls if c.span is not None]
        assert rec["episode"]["zooms"] == [[c.time, c.box] for c in t.calls if c.box is not None]
        assert rec["tool_calls"] == {tool: sum(c.tool == tool for c in t.calls) for tool in {c.tool for c in t.calls}}
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

    assert len(rewards) > 1 or not varied, "the policy should give the groups different rewards (else advantages are all 0)"
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


@pytest.mark.parametrize("preset", list(PRESETS))
def test_run_rollouts_and_verl_v1_play_identical_episodes(tmp_path, tiny_model, samples, store, preset):
    trajs, local = local_episodes(samples, preset, tiny_model)
    _, stored, dumped = verl_episodes(tmp_path, samples, preset, tiny_model)
    assert_same_episodes(trajs, local, stored, dumped, preset)


WIDE = (4.0, 16.0)  # 4 frames at 5.5, 8.5, 11.5, 14.5 s: around the clue [12, 13.5], none in it


def decide_wide(turn: int, seed: int, frames: np.ndarray) -> str:
    """A seeded crop, on an even seed the wide one whose frames step over the clue, then an answer."""
    if turn == 0:
        return crop(*(WIDE if seed % 2 == 0 else WINDOWS[seed % len(WINDOWS)]))
    return pixel_answer(frames)


def test_coverage_by_frames_scores_the_same_frames_on_both_paths(tmp_path, tiny_model, samples, store):
    """`clue_seek.coverage_by: frames` reads the frame times each crop returned; both drivers carry them
    to the reward: the same evidence and rewards, and the wide crop's frames cover none of the clue."""
    frames = {"clue_seek": {"coverage_by": "frames"}}
    trajs, local = local_episodes(samples, "csgrpo", tiny_model, decide=decide_wide, reward_params=frames)
    _, stored, dumped = verl_episodes(tmp_path, samples, "csgrpo", tiny_model, decide=decide_wide, reward_params=frames)
    assert_same_episodes(trajs, local, stored, dumped, "csgrpo")
    first = {(c.start, c.end): t.turns[0].evidence["coverage"] for t in trajs if (c := t.turns[0].call) is not None}
    assert first[WIDE] == 0.0 and max(first.values()) > 0  # the wide crop saw nothing; a window in the clue did


@pytest.mark.parametrize("preset", ["csgrpo", "dmgrpo"])
def test_with_crop_and_zoom_both_paths_play_identical_episodes(tmp_path, tiny_model, zoom_samples, store, preset):
    """An env with two tools: every episode crops and zooms; the zoom's frame (masked in DM-GRPO's
    mask group when its time is) is what the answer is read from, its box the clue-seek zoom credit."""
    env = {**ENV, "tools": TWO_TOOLS}
    trajs, local = local_episodes(zoom_samples, preset, tiny_model, env, decide_zoom)
    _, stored, dumped = verl_episodes(tmp_path, zoom_samples, preset, tiny_model, env, decide_zoom, response_length=512)  # two tool turns
    # DM-GRPO's gate zeroes these episodes' rewards (every answer is wrong): what this case checks is the mask on zoomed frames
    assert_same_episodes(trajs, local, stored, dumped, preset, varied=preset != "dmgrpo")
    if preset == "dmgrpo":
        zoomed = [t.turns[1].observation.frames[0] for t in trajs if t.group.role == "perturbed"]
        assert {f.masked for f in zoomed} == {True, False}  # a zoom whose time the mask covers is blanked, another is not
    origin = [t for t in trajs if t.group.role == "origin"]
    assert all([c.tool for c in t.calls] == TWO_TOOLS for t in origin)
    zooms = [c for t in origin for c in t.calls if c.tool == "zoom"]
    assert {c.clipped for c in zooms} == {True, False}  # the seeds pick different boxes, one clipped to the frame
    assert any(c.box_iou is not None and c.box_iou >= 0.5 for c in zooms)  # and one on the key-frame box: the zoom credit
    for k, ef in enumerate(list(stored["extra_fields"])):  # the zoomed frame is the third video of each trained row
        grid = stored["multi_modal_inputs"][k]["video_grid_thw"]
        assert grid.shape[0] == 3 and int(grid[2][0]) == 1, grid  # one frame: one temporal patch
        assert ef["videoseek"]["tools"] == TWO_TOOLS


@pytest.mark.parametrize("over_turn_mask", [False, True], ids=["all-episodes", "over-turn-mask"])
def test_turn_level_credit_gives_the_same_per_token_advantages_on_both_paths(tmp_path, tiny_model, samples, store, over_turn_mask):
    """`videoseek_turn_grpo`: verl's v1 trainer (the agent loop places each turn's reward on its
    first token, `TurnRewardOutput`) and the local backend's `grpo_advantages` (the same layout on its
    loss mask) give every policy token the same advantage; turns of one episode differ. With
    over-turn masking, episodes cut by the turn limit train on nothing on both paths."""
    from videoseek.training.local_backend.grpo import grpo_advantages, response_mask_of
    from videoseek.training.verl_plugin.estimators import TURN_ESTIMATOR_NAME

    env = {**ENV, "max_turns": 3}
    policy = decide_look_on if not over_turn_mask else decide_over_turn  # some episodes crop a third time: cut by the turn limit
    trajs, local = local_episodes(samples, "csgrpo", tiny_model, env, policy)
    loop = {"turn_rewards": True, "over_turn_mask": over_turn_mask}
    _, stored, _ = verl_episodes(tmp_path, samples, "csgrpo", tiny_model, env, policy, loop=loop, response_length=512,
                                 overrides={"algorithm.adv_estimator": TURN_ESTIMATOR_NAME})  # fmt: skip
    mask = response_mask_of(local.episodes)
    if over_turn_mask:
        mask = mask * torch.tensor([0.0 if cut else 1.0 for cut in local.truncated]).unsqueeze(1)
    advantages = grpo_advantages(local.rewards, local.group_ids, mask, estimator=TURN_ESTIMATOR_NAME, turn_rewards=local.turn_rewards)
    records = [ef["videoseek"]["episode_id"] for ef in list(stored["extra_fields"])]
    assert sorted(records) == sorted(t.episode_id for t in local.trajectories)
    prompt_len = {k: len(stored["prompts"][k]) for k in range(len(records))}
    for i, t in enumerate(local.trajectories):
        k = records.index(t.episode_id)
        verl_mask = stored["response_mask"][k].bool()
        verl_adv = stored["advantages"][k][verl_mask]
        start = prompt_len[k] - 1  # local rows are aligned with loss_mask[1:]
        local_row = advantages[i, start : start + len(stored["response_mask"][k])]
        local_mask = mask[i, start : start + len(stored["response_mask"][k])].bool()
        assert local_mask.tolist() == verl_mask.tolist(), t.episode_id
        assert local_row[local_mask].tolist() == pytest.approx(verl_adv.tolist(), abs=1e-6), t.episode_id
    if over_turn_mask:
        cut = [records.index(t.episode_id) for t, c in zip(local.trajectories, local.truncated) if c]
        assert 0 < len(cut) < len(records) and all(int(stored["response_mask"][k].sum()) == 0 for k in cut)
        return
    assert {tuple(r) for r in local.turn_rewards} == {(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)} or len({tuple(r) for r in local.turn_rewards}) > 1
    per_turn = [sorted({round(float(a), 5) for a in advantages[i][mask[i] > 0].tolist()}) for i in range(len(local.trajectories))]
    assert any(len(values) > 1 for values in per_turn), "the turns of an episode should get different advantages"


def decide_repeat(turn: int, seed: int, frames: np.ndarray) -> str:
    """A crop that misses, then the same crop again (odd seeds) or one in the clue, then the answer."""
    if turn == 0:
        return crop(*WINDOWS[1])
    if turn == 1:
        return crop(*WINDOWS[1 if seed % 2 else 0])
    return pixel_answer(frames)


def test_turn_penalty_charges_the_repeated_crop_the_same_on_both_paths(tmp_path, tiny_model, samples, store):
    """`clue_seek.turn_penalty`: the turn that repeats a crop gets -turn_penalty as its turn reward on
    both drivers (each calls `agents.groups.turn_rewards_of` with the run's reward config), and
    verl's trainer and the local backend give every policy token the same advantage."""
    from videoseek.training.local_backend.grpo import grpo_advantages, response_mask_of
    from videoseek.training.verl_plugin.estimators import TURN_ESTIMATOR_NAME

    env, penalty = {**ENV, "max_turns": 3}, {"clue_seek": {"turn_penalty": 0.5}}
    trajs, local = local_episodes(samples, "csgrpo", tiny_model, env, decide_repeat, reward_params=penalty)
    _, stored, _ = verl_episodes(tmp_path, samples, "csgrpo", tiny_model, env, decide_repeat, loop={"turn_rewards": True}, response_length=512,
                                 overrides={"algorithm.adv_estimator": TURN_ESTIMATOR_NAME}, reward_params=penalty)  # fmt: skip
    assert {tuple(r) for r in local.turn_rewards} == {(0.0, -0.5, 0.0), (0.0, 1.0, 0.0)}  # the repeat, the crop in the clue
    mask = response_mask_of(local.episodes)
    advantages = grpo_advantages(local.rewards, local.group_ids, mask, estimator=TURN_ESTIMATOR_NAME, turn_rewards=local.turn_rewards)
    records = [ef["videoseek"]["episode_id"] for ef in list(stored["extra_fields"])]
    assert sorted(records) == sorted(t.episode_id for t in local.trajectories)
    for i, t in enumerate(local.trajectories):
        k = records.index(t.episode_id)
        verl_mask = stored["response_mask"][k].bool()
        assert list(stored["extra_fields"][k]["videoseek"]["turn_rewards"]) == local.turn_rewards[i], t.episode_id
        start = len(stored["prompts"][k]) - 1  # local rows are aligned with loss_mask[1:]
        local_row = advantages[i, start : start + len(verl_mask)]
        assert local_row[verl_mask].tolist() == pytest.approx(stored["advantages"][k][verl_mask].tolist(), abs=1e-6), t.episode_id


def test_first_window_starts_play_the_same_forced_crop_on_both_paths(tmp_path, tiny_model, samples, store):
    """`look_on_starts: [first_window]` (an exploring start): every origin episode begins with the
    forced crop of the first quarter window, whatever it shows; both paths play the same episodes."""
    trajs, local = local_episodes(samples, "csgrpo", tiny_model, decide=decide_after_first, look_on_share=1.0, look_on_starts=["first_window"])
    _, stored, dumped = verl_episodes(tmp_path, samples, "csgrpo", tiny_model, decide=decide_after_first, response_length=512,
                                      loop={"look_on_share": 1.0, "look_on_starts": ["first_window"]})  # fmt: skip
    assert_same_episodes(trajs, local, stored, dumped, "csgrpo")
    for t in trajs:
        assert [u.forced for u in t.turns] == [True] + [False] * (len(t.turns) - 1) and (t.turns[0].call.start, t.turns[0].call.end) == (0.0, 5.0)
        assert dumped[t.episode_id].turns[0].forced
    assert {len(t.turns) for t in trajs} == {2, 3}  # some look on, some answer


def test_groups_that_start_looking_on_play_the_same_forced_turns_and_train_on_the_policys_only(tmp_path, tiny_model, samples, store):
    """`look_on_share` 1: every origin episode starts with the same two forced crops that missed
    (`agents.groups.look_on_start`), then the policy decides. Both paths play the same episodes, put
    no loss on the forced turns (verl's response mask, the local loss mask) and give the policy's
    turns the same turn-level advantages; the forced turns get no turn reward."""
    from videoseek.training.local_backend.grpo import grpo_advantages, response_mask_of
    from videoseek.training.verl_plugin.estimators import TURN_ESTIMATOR_NAME

    env = {**ENV, "max_turns": 5}
    trajs, local = local_episodes(samples, "csgrpo", tiny_model, env, decide_after_misses, look_on_share=1.0)
    _, stored, dumped = verl_episodes(tmp_path / "trajectory", samples, "csgrpo", tiny_model, env, decide_after_misses, response_length=768,
                                      loop={"look_on_share": 1.0})  # fmt: skip
    assert_same_episodes(trajs, local, stored, dumped, "csgrpo")
    _, stored, _ = verl_episodes(tmp_path / "turn", samples, "csgrpo", tiny_model, env, decide_after_misses, response_length=768,
                                 loop={"look_on_share": 1.0, "turn_rewards": True}, overrides={"algorithm.adv_estimator": TURN_ESTIMATOR_NAME})  # fmt: skip
    (a, b), = samples[0].clue_intervals
    for t in trajs:
        assert [u.forced for u in t.turns[:2]] == [True, True] and not any(u.forced for u in t.turns[2:])
        assert all(u.call.end <= a or u.call.start >= b for u in t.turns[:2]) and t.turns[1].evidence["coverage"] == 0.0
        assert dumped[t.episode_id].turns[1].forced and not dumped[t.episode_id].turns[0].tokens
    assert {len(t.turns) for t in trajs} == {3, 4}  # some look on, some answer: the group's decision differs
    assert {tuple(r) for r in local.turn_rewards} == {(0.0,), (1.0, 0.0)}  # the policy's turns only
    mask = response_mask_of(local.episodes)
    advantages = grpo_advantages(local.rewards, local.group_ids, mask, estimator=TURN_ESTIMATOR_NAME, turn_rewards=local.turn_rewards)
    records = [ef["videoseek"]["episode_id"] for ef in list(stored["extra_fields"])]
    for i, t in enumerate(local.trajectories):
        k = records.index(t.episode_id)
        verl_mask = stored["response_mask"][k].bool()
        start = len(stored["prompts"][k]) - 1  # local rows are aligned with loss_mask[1:]
        local_row = advantages[i, start : start + len(verl_mask)]
        assert local_row[verl_mask].tolist() == pytest.approx(stored["advantages"][k][verl_mask].tolist(), abs=1e-6), t.episode_id


@pytest.mark.parametrize("preset", ["csgrpo", "dmgrpo"])
def test_frame_budget_gating_draws_the_same_initial_frames_on_both_paths(tmp_path, tiny_model, samples, store, preset):
    """`initial_frames` (ParaVT's frame-budget gating): each episode's initial frame count is drawn from
    its seed, the same on both drivers, perturbed episodes included; the counts differ across episodes."""
    choices = [2, 4]
    trajs, local = local_episodes(samples, preset, tiny_model, initial_frames=choices)
    _, stored, dumped = verl_episodes(tmp_path, samples, preset, tiny_model, loop={"initial_frames": choices})
    assert_same_episodes(trajs, local, stored, dumped, preset, varied=False)
    assert {len(t.initial.frames) for t in trajs} == set(choices)


class ScriptedFirst:
    """A policy that plays `turns` (texts, with the token ids a model writing them would have) first,
    then lets `policy` play: the tiny model then answers from what the crop and the zoom showed."""

    def __init__(self, policy, turns) -> None:
        self.policy, self.turns = policy, list(turns)
        self.name = policy.name
        self.end_id = policy.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def act(self, batch):
        out = [None] * len(batch)
        rest = [k for k, item in enumerate(batch) if item.turn >= len(self.turns)]
        for k, item in enumerate(batch):
            if item.turn < len(self.turns):
                text = self.turns[item.turn]
                out[k] = PolicyOutput(text, token_ids=self.policy.tokenizer.encode(text, add_special_tokens=False) + [self.end_id])
        for k, o in zip(rest, self.policy.act([batch[k] for k in rest]) if rest else []):
            out[k] = o
        return out


@pytest.mark.slow
@pytest.mark.parametrize("tools", [None, TWO_TOOLS], ids=["default-tools", "crop-zoom"])
def test_the_tiny_model_greedy_plays_the_same_tokens_on_both_paths(tmp_path, family_model_dir, samples, store, tools):
    """A real model: the tiny VLM of each family, greedy, generating locally (`TransformersPolicy`)
    and behind the emulated vLLM server (the same model, from the ids and frames verl sends). With
    two tools, both paths play a scripted crop and zoom first, then the model goes on from the
    zoomed frame; the schemas of both tools are in its prompt."""
    from verl_harness import TinyModelServer
    from videoseek.agents.hf_policy import TransformersPolicy

    _, model = family_model_dir
    env = {**ENV, "tools": tools} if tools else ENV
    max_turn_tokens = 64  # make_config's cap of one assistant turn
    policy = TransformersPolicy(model, max_new_tokens=max_turn_tokens, temperature=0.0, tools=env.get("tools", True), **PIXELS)
    scripted = [crop(11.5, 14.0), zoom(12.5, KEY_BOX)] if tools else []
    recorder = RecordingPolicy(ScriptedFirst(policy, scripted))
    config = EnvConfig(**env, reward=RewardConfig(preset="csgrpo"))
    trajs = run_rollouts(samples, recorder, group_size=GROUP, env_config=config, seed=SEED, step=STEP, progress=False, batch_episodes=1)
    local = training_batch(trajs, recorder, policy.renderer)

    server = TinyModelServer(model, do_sample=False)
    if scripted:  # the server plays the same scripted turns, then generates
        generate = server.generate

        async def scripted_generate(prompt_ids, sampling_params, request_id, **kwargs):
            turn = assistant_turns(server.tokenizer, list(prompt_ids))
            if turn >= len(scripted):
                return await generate(prompt_ids, sampling_params, request_id, **kwargs)
            server._check_vision(list(prompt_ids), kwargs.get("image_data"), kwargs.get("video_data"), kwargs.get("mm_processor_kwargs"))
            from verl.workers.rollout.replica import TokenOutput

            ids = server.tokenizer.encode(scripted[turn], add_special_tokens=False) + [server.end_id]
            return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids) if sampling_params.get("logprobs") else None, extra_fields={"global_steps": 0})

        server.generate = scripted_generate
    # a response budget no episode reaches: the local driver has none (a turn the budget cuts is verl's alone)
    _, stored, dumped = verl_episodes(tmp_path, samples, "csgrpo", model, env, server=server, response_length=4096)
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
        assert episode_facts(dumped[t.episode_id]) == episode_facts(t), t.episode_id
        if tools:
            assert [c.tool for c in t.calls] == TWO_TOOLS and stored["multi_modal_inputs"][k]["video_grid_thw"].shape[0] == 3
