"""The frozen vision tower's output reused between the reference and policy forwards of one GRPO
update (`training/local_backend/vision_cache.py`, issue 37).

First what the reuse rests on: the tower's per-video output does not depend on which other videos
share its call (window and full attention are per video), and the reference's and the policy's
frozen blocks compute the same hidden states. Then the reuse itself: an update with it equals one
without it, bit for bit, and the policy's blocks are skipped."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("verl")

from verl.utils.config import omega_conf_to_dataclass
from videoseek.agents.hf_policy import TransformersPolicy
from videoseek.agents.rollout import run_rollouts
from videoseek.envs.env import EnvConfig
from videoseek.training.local_backend.grpo import grpo_update
from videoseek.training.local_backend.rollout import RecordingPolicy, training_batch
from videoseek.training.local_backend.sft import freeze_vision_encoder
from videoseek.training.local_backend.vision_cache import shared_vision, vision_tower

ENV = EnvConfig(initial_frames=2, frames_per_call=2, max_turns=2, max_total_frames=8, max_pixels=56 * 56)


@pytest.fixture(scope="module")
def played(tiny_model_dir, index_video):
    from videoseek.envs.sample import VideoSample

    index_sample = VideoSample(id="vr-1", video=str(index_video), question="Which colour flashes?",
                               options=["A. red", "B. green", "C. blue", "D. yellow"], answer="B", clue_intervals=[(12.0, 13.5)])  # fmt: skip
    torch.set_num_threads(1)
    policy = TransformersPolicy(str(tiny_model_dir), max_new_tokens=16, temperature=1.0, seed=0)
    recorder = RecordingPolicy(policy)
    trajs = run_rollouts([index_sample], recorder, group_size=2, env_config=ENV, seed=0, step=1, progress=False)
    return policy, training_batch(trajs, recorder, policy.renderer)


def test_per_video_outputs_do_not_depend_on_the_other_videos_in_the_call(played):
    policy, batch = played
    visual = vision_tower(policy.model)
    inputs = batch.episodes[0].model_inputs
    pixels, grid = inputs["pixel_values_videos"], inputs["video_grid_thw"]
    rows = grid.prod(-1).tolist()
    merged = [r // visual.spatial_merge_size**2 for r in rows]
    with torch.no_grad():
        together = visual(pixels.to(visual.dtype), grid_thw=grid).pooler_output
        alone = visual(pixels[: rows[0]].to(visual.dtype), grid_thw=grid[:1]).pooler_output
        doubled = visual(torch.cat([pixels[: rows[0]]] * 2).to(visual.dtype), grid_thw=torch.cat([grid[:1]] * 2)).pooler_output
    assert torch.equal(together[: merged[0]], alone)  # the first video alone, or beside the others
    assert torch.equal(doubled[: merged[0]], doubled[merged[0] :]) and torch.equal(doubled[: merged[0]], alone)


def test_an_update_with_vision_reuse_equals_one_without(played):
    from videoseek.training.verl_plugin.config import TrainSpec, compose, verl_overrides, write_agent_loop_yaml

    policy, batch = played
    spec = TrainSpec(model="x", train_files=[], val_files=[], out=str(policy.model.name_or_path) + "-spec")
    actor = omega_conf_to_dataclass(compose(verl_overrides(spec, write_agent_loop_yaml(spec))).actor_rollout_ref.actor)
    results = []
    for reuse in (False, True):
        torch.manual_seed(0)
        model = copy.deepcopy(policy.model)
        freeze_vision_encoder(model)
        reference = copy.deepcopy(model).eval().requires_grad_(False)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        rewards = [1.0, 0.0][: len(batch.episodes)]
        stats = grpo_update(model, reference, optimizer, batch.episodes, rewards, batch.group_ids, actor,
                            record_tokens=True, vision_reuse=reuse)  # fmt: skip
        results.append((stats, {k: v.detach().clone() for k, v in model.state_dict().items()}))
    (plain, plain_state), (reused, reused_state) = results
    assert plain.loss == reused.loss and plain.kl == reused.kl and plain.grad_norm == reused.grad_norm
    assert plain.token_logprobs == reused.token_logprobs and plain.ref_token_logprobs == reused.ref_token_logprobs
    assert all(torch.equal(plain_state[k], reused_state[k]) for k in plain_state)


def test_the_policy_blocks_are_skipped_and_restored(played):
    policy, batch = played
    model = copy.deepcopy(policy.model)
    freeze_vision_encoder(model)
    reference = copy.deepcopy(model).eval()
    calls = {"n": 0}
    block = vision_tower(model).blocks[0]
    original = block.forward

    def counting(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    block.forward = counting
    ep = batch.episodes[0]
    extra = dict(ep.model_inputs)
    with torch.no_grad(), shared_vision(model, reference) as shared:
        shared.episode = 0
        ids = ep.input_ids.unsqueeze(0)
        want = reference(input_ids=ids, attention_mask=torch.ones_like(ids), **extra).logits
        got = model(input_ids=ids, attention_mask=torch.ones_like(ids), **extra).logits
        assert shared.hits == 1 and calls["n"] == 0  # the policy's wrapped first block never ran
    assert torch.equal(want, got)
    assert block.forward is counting  # our own patch is back in place, the cache's removed
    with pytest.raises(ValueError, match="frozen vision tower"):
        with shared_vision(copy.deepcopy(policy.model), reference):
            pass
