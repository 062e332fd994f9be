"""SFT cold start and the GRPO step it feeds, for both model families (issue 12, 17).

- the SFT loss mask covers exactly the assistant tokens, and an exported episode tokenises to the
  very ids its live rollout had;
- SFT on a handful of traces drops the loss and greedy decoding then writes the trained tool call;
- one local GRPO step raises the log-probability of positive-advantage rollouts and lowers it for
  negative ones;
- `run_sft.py --backend verl --dry-run` composes verl's SFT trainer config and verl's own
  `MultiTurnSFTDataset` reads the exported rows.
"""

from __future__ import annotations

import json

import pytest
import torch
import yaml

pytest.importorskip("verl")

from videoseek.agents.hf_policy import TransformersPolicy
from videoseek.agents.policy import PolicyInput
from videoseek.agents.prompting import ConversationRenderer, initial_messages
from videoseek.agents.rollout import run_rollouts
from videoseek.agents.scripted import SweepPolicy
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.training import run_sft
from videoseek.training.exports.sft import export_sft
from videoseek.training.local_backend.grpo import batch_logprobs, grpo_update, response_mask_of, token_logprobs
from videoseek.training.local_backend.rollout import RecordingPolicy, tokenize_episode, training_batch
from videoseek.training.local_backend.sft import load_sft_episodes

ENV = EnvConfig(initial_frames=2, frames_per_call=2, max_turns=3, max_total_frames=8, max_pixels=64 * 64)


@pytest.fixture(scope="module")
def traces(tmp_path_factory, index_video):
    """Sweep traces of two questions (2 crops, then a guess), the live conversations, the export."""
    from videoseek.envs.sample import VideoSample

    samples = [
        VideoSample(id=f"q{k}", video=str(index_video), question=q, options=["A. red", "B. green"], answer="B", clue_intervals=[(12.0, 13.5)])
        for k, q in enumerate(["Which colour flashes?", "What colour is the lamp?"])
    ]
    out = tmp_path_factory.mktemp("traces")
    recorder = RecordingPolicy(SweepPolicy(windows=2))
    trajectories = run_rollouts(samples, recorder, env_config=ENV, out_dir=out / "run", progress=False)
    [parquet] = export_sft([out / "run"], out / "sft", only_correct=False)
    return samples, trajectories, recorder, parquet


def test_the_loss_mask_covers_exactly_the_assistant_tokens_of_the_live_rollout(family_model_dir, traces):
    _, path = family_model_dir
    _, trajectories, recorder, parquet = traces
    policy_renderer = ConversationRenderer(TransformersPolicy(path, max_new_tokens=4).processor)
    episodes = load_sft_episodes([parquet], policy_renderer.processor)
    assert len(episodes) == len(trajectories) == 2
    for trajectory, episode in zip(trajectories, episodes):
        live = tokenize_episode(policy_renderer, recorder.conversations[trajectory.episode_id])
        # Same ids as the rollout rendered them (frames from the exported JPEGs, at their real times).
        assert torch.equal(episode.input_ids, live.input_ids)
        grids = {k: v for k, v in episode.model_inputs.items() if "grid" in k or "second" in k}
        for key, value in grids.items():
            torch.testing.assert_close(value, live.model_inputs[key])
        # The mask is every assistant turn's text plus the <|im_end|> closing it, and nothing else.
        masked = episode.input_ids[episode.loss_mask.bool()].tolist()
        expected = "".join(turn.assistant + "<|im_end|>" for turn in trajectory.turns)
        assert policy_renderer.tokenizer.decode(masked) == expected
        assert int(episode.loss_mask.sum()) == int(live.loss_mask.sum()) + len(trajectory.turns)


ZOOM_TURNS = [
    '<think>Look.</think>\n<tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 13.5}}</tool_call>',
    '<think>Closer.</think>\n<tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.1, 0.1, 0.6, 0.6]}}</tool_call>',
    '<think>Once more.</think>\n<tool_call>{"name": "frame_at", "arguments": {"time": 3.0}}</tool_call>',
    "<think>Green.</think>\n<answer>B</answer>",
]


def test_an_exported_zoom_and_custom_tool_episode_tokenises_as_its_live_rollout(family_model_dir, traces, tmp_path):
    """export-sft writes any tool's calls and results as the episode had them, and the system message
    of the env's tools: the ids equal those of the live conversation rendered with those tools."""
    from pathlib import Path

    from videoseek.agents.policy import PolicyOutput
    from videoseek.agents.scripted import ScriptedPolicy

    class Prober(ScriptedPolicy):
        name = "prober"

        def turn(self, inp):
            return PolicyOutput(text=ZOOM_TURNS[sum(m.role == "tool" for m in inp.messages)])

    _, path = family_model_dir
    samples, *_ = traces
    tools = ["crop_video", "zoom", f"{Path(__file__).resolve().parents[2] / 'examples' / 'custom_tool.py'}:FrameAtTool"]
    recorder = RecordingPolicy(Prober())
    config = ENV.model_copy(update={"tools": tools, "max_turns": 4})
    [trajectory] = run_rollouts(samples[:1], recorder, env_config=config, out_dir=tmp_path / "run", progress=False)
    assert [c.tool for c in trajectory.calls] == ["crop_video", "zoom", "frame_at"]
    [parquet] = export_sft([tmp_path / "run"], tmp_path / "sft", only_correct=False, tools=tools)  # bare run_rollouts output: no run.json
    processor = TransformersPolicy(path, max_new_tokens=4).processor
    [episode] = load_sft_episodes([parquet], processor)
    live = tokenize_episode(ConversationRenderer(processor, tools=tools), recorder.conversations[trajectory.episode_id])
    assert torch.equal(episode.input_ids, live.input_ids)
    for key in (k for k in episode.model_inputs if "grid" in k or "second" in k):
        torch.testing.assert_close(episode.model_inputs[key], live.model_inputs[key])
    masked = episode.input_ids[episode.loss_mask.bool()].tolist()
    assert processor.tokenizer.decode(masked) == "".join(turn + "<|im_end|>" for turn in ZOOM_TURNS)


def test_sft_drops_the_loss_and_greedy_decoding_writes_the_trained_call(family_model_dir, traces, tmp_path, single_thread_torch):
    family, path = family_model_dir
    samples, trajectories, _, parquet = traces
    out = tmp_path / "sft"
    argv = ["--model", str(path), "--data", str(parquet), "--out", str(out), "--epochs", "80", "--batch-size", "2", "--lr", "5e-3"]
    assert run_sft.main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["loss"] < rows[0]["loss"] / 5, (rows[0]["loss"], rows[-1]["loss"])

    # The checkpoint plays as hf:PATH; greedily it writes the first crop its traces made.
    policy = TransformersPolicy(out / "checkpoint", max_new_tokens=48, temperature=0)
    env = VideoSeekEnv(samples[0], ENV)
    obs, _ = env.reset()
    [output] = policy.act([PolicyInput(sample=env.sample, messages=initial_messages(obs), evidence=env.evidence, turn=0, episode_id="e")])
    assert output.text == trajectories[0].turns[0].assistant, family


def test_one_grpo_step_raises_positive_and_lowers_negative_advantage_rollouts(family_model_dir, index_sample, tmp_path, single_thread_torch):
    import copy

    from verl.utils.config import omega_conf_to_dataclass
    from videoseek.training.verl_plugin.config import TrainSpec, compose, verl_overrides, write_agent_loop_yaml

    _, path = family_model_dir
    policy = TransformersPolicy(path, max_new_tokens=10, temperature=1.0, seed=5)
    recorder = RecordingPolicy(policy)
    trajectories = run_rollouts([index_sample], recorder, group_size=4, env_config=ENV, progress=False)
    batch = training_batch(trajectories, recorder, policy.renderer)
    rewards = [1.0, 0.0, 1.0, 0.0]  # a fixed batch: two rollouts better than their group, two worse
    spec = TrainSpec(model=str(path), train_files=[], val_files=[], out=str(tmp_path), kl_coef=0.0)
    actor = omega_conf_to_dataclass(compose(verl_overrides(spec, write_agent_loop_yaml(spec))).actor_rollout_ref.actor)
    reference = copy.deepcopy(policy.model).eval()
    optimizer = torch.optim.SGD(policy.model.parameters(), lr=0.5)

    mask = response_mask_of(batch.episodes)
    with torch.no_grad():
        before = (batch_logprobs(policy.model, batch.episodes, "cpu") * mask).sum(1)
        # The masked fast path gives token_logprobs' numbers on the policy's tokens.
        for i, e in enumerate(batch.episodes):
            full = token_logprobs(policy.model, e, "cpu")
            torch.testing.assert_close(batch_logprobs(policy.model, [e], "cpu")[0] * mask[i, : full.numel()], full * mask[i, : full.numel()])
    stats = grpo_update(policy.model, reference, optimizer, batch.episodes, rewards, batch.group_ids, actor)
    with torch.no_grad():
        after = (batch_logprobs(policy.model, batch.episodes, "cpu") * mask).sum(1)
    assert [a > 0 for a in stats.advantages] == [True, False, True, False]
    assert (after - before)[[0, 2]].min() > 0 and (after - before)[[1, 3]].max() < 0, (before, after)
    assert stats.entropy > 0


def test_verl_sft_dry_run_composes_and_verls_dataset_reads_the_rows(family_model_dir, traces, tmp_path):
    _, path = family_model_dir
    *_, parquet = traces
    out = tmp_path / "verl"
    argv = ["--backend", "verl", "--dry-run", "--model", str(path), "--data", str(parquet), "--out", str(out), "--batch-size", "2"]
    assert run_sft.main(argv) == 0
    cfg = yaml.safe_load((out / "verl_sft_config.yaml").read_text())
    assert cfg["model"]["path"] == str(path) and cfg["data"]["train_files"] == [str(parquet.resolve())]
    assert "hf_model" in cfg["checkpoint"]["save_contents"] and "verl.trainer.sft_trainer" in (out / "command.sh").read_text()
    assert run_sft.main([*argv[:-2], "--batch-size", "3"]) == 2  # two rows cannot fill a batch of three
