"""Model policies with the env's tools: the prompt lists what `info["tools"]` offers, and a zoomed
frame (one small frame of its own size) reaches both tiny families as a one-frame video, with and
without the turn cache."""

from __future__ import annotations

import pytest

from videoseek.agents.hf_policy import TransformersPolicy
from videoseek.agents.policy import PolicyOutput
from videoseek.agents.rollout import run_rollouts
from videoseek.envs import EnvConfig
from videoseek.envs.actions import ToolCall, action_to_text

FORCED = [ToolCall("zoom", {"time": 12.5, "box": [0.1, 0.1, 0.2, 0.2]}), ToolCall("crop_video", {"start": 12.0, "end": 13.5})]


class ForcedCalls:
    """The model's policy, with its first turns replaced by fixed tool calls (the model then goes on)."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def act(self, batch):
        outs = self.inner.act(batch)
        return [PolicyOutput(action_to_text(FORCED[inp.turn])) if inp.turn < len(FORCED) else out for inp, out in zip(batch, outs)]


def play(path, sample, reuse_kv):
    policy = TransformersPolicy(path, max_new_tokens=4, temperature=0, reuse_kv=reuse_kv, tools=False)
    (traj,) = run_rollouts([sample], ForcedCalls(policy), env_config=EnvConfig(tools=["crop_video", "zoom"], max_turns=3))
    return policy, traj


def test_model_policies_render_the_envs_tools_and_zoomed_frames(family_model_dir, index_sample, single_thread_torch):
    family, path = family_model_dir
    policy, traj = play(path, index_sample, reuse_kv=True)
    assert traj.failure is None, traj.failure
    zoom, crop, last = traj.turns
    assert (zoom.tool_name, zoom.error, crop.tool_name, crop.error) == ("zoom", None, "crop_video", None)
    assert len(zoom.observation.frames) == 1 and len(crop.observation.frames) == 8
    assert [t["function"]["name"] for t in policy.renderer.tools] == ["crop_video", "zoom"]  # the env's, not the policy's `tools=False`
    (state,) = policy.renders._states.values()  # the last turn's prompt: the initial frames, the zoom's, the crop's
    assert [len(frames) for frames, _ in state.videos] == [8, 1, 8]
    # The turn cache continues across the zoomed frame exactly: the same greedy tokens as whole prefills.
    _, whole = play(path, index_sample, reuse_kv=False)
    assert [t.assistant for t in whole.turns] == [t.assistant for t in traj.turns]
