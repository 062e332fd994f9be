"""`openai:URL#MODEL`, a served model as the policy, against a loopback stub server (tests/openai_stub.py):
what each request holds (frames, times, history, model, seeds), concurrency, retries, failures and
their resume, unusable replies, native tool calls, and the replay of a run from its response cache
with the server down.

A real vLLM server is exercised by tests/agents/test_openai_vllm.py (a benchmark step)."""

from __future__ import annotations

import base64
import io
import json
import time

import numpy as np
import pytest
from openai_stub import StubServer, message_text
from PIL import Image

from videoseek.agents.openai_client import Endpoint, OpenAIClient, OpenAIError, ResponseCache, ServerRefused
from videoseek.agents.openai_policy import CACHE_FILE, OpenAIPolicy, close_open_tag, served_chat_template, tools_block
from videoseek.agents.policy import PolicyInput, stable_seed
from videoseek.agents.prompting import initial_messages
from videoseek.agents.rollout import run_rollouts
from videoseek.cli import main
from videoseek.envs import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import write_jsonl
from videoseek.envs.trajectory import read_trajectories

CONFIG = EnvConfig(initial_frames=4, frames_per_call=4, max_turns=3, max_pixels=64 * 32)
ENV_FLAGS = ["--frames", "4", "--env", "frames_per_call=4", "--max-turns", "3", "--max-pixels", str(64 * 32)]


@pytest.fixture
def stub():
    server = StubServer()
    try:
        yield server
    finally:
        server.stop()


def policy_for(stub: StubServer, **kwargs) -> OpenAIPolicy:
    return OpenAIPolicy(f"{stub.url}#stub-vl", backoff=0.01, **kwargs)


def decode_frames(url: str) -> list[np.ndarray]:
    head, _, data = url.partition(",")
    assert head in ("data:video/jpeg;base64", "data:image/jpeg;base64")
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(part)))) for part in data.split(",")]


def parts_of(message: dict, kind: str) -> list[dict]:
    content = message["content"]
    return [p for p in content if p["type"] == kind] if isinstance(content, list) else []


def first_inputs(sample, count: int) -> list[PolicyInput]:
    out = []
    for g in range(count):
        env = VideoSeekEnv(sample, CONFIG)
        obs, info = env.reset(seed=g)
        out.append(PolicyInput(sample, initial_messages(obs, info["instructions"]), env.evidence, 0, f"{sample.id}/g{g}", tools=info["tools"]))
    return out


# ---- what a request holds ----------------------------------------------------------------------
def test_requests_carry_the_envs_conversation_frames_times_and_history(stub, index_sample):
    policy = policy_for(stub)
    (traj,) = run_rollouts([index_sample], policy, env_config=CONFIG, progress=False)
    env = VideoSeekEnv(index_sample, CONFIG)
    obs, info = env.reset(seed=0)
    first, second = stub.bodies
    assert first["model"] == second["model"] == "stub-vl" and first["n"] == 1 and first["max_tokens"] == 256
    assert first["stop"] == ["</tool_call>", "</answer>"] and first["include_stop_str_in_output"] is True
    assert first["seed"] == stable_seed(0, index_sample.id, 0) % 2**31 and second["seed"] == stable_seed(0, index_sample.id, 1) % 2**31
    # the env's system prompt and its tools as the chat template lists them (the text protocol)
    system, user = first["messages"]
    assert system == {"role": "system", "content": info["instructions"] + tools_block(info["tools"])}
    assert "tools" not in first and '"name": "crop_video"' in system["content"]
    # the question after its frames: the label with the times, one video of 4 JPEG frames, the text
    label, video, question = user["content"]
    assert label == {"type": "text", "text": "Frames at " + ", ".join(f"{t:.1f}s" for t in obs["timestamps"]) + ":\n"}
    assert question == {"type": "text", "text": "\n" + obs["text"]}
    frames = decode_frames(video["video_url"]["url"])
    assert len(frames) == 4 and all(f.shape == obs["frames"][0].shape for f in frames)
    assert max(np.abs(f.astype(int) - o.astype(int)).mean() for f, o in zip(frames, obs["frames"])) < 4  # JPEG, quality 95
    # one video: its times as vLLM reads them (the renderer's metadata); two videos of other times: labels only
    times = first["media_io_kwargs"]["video"]
    assert times["frames_indices"] == [round(t * 1000) for t in obs["timestamps"]] and times["fps"] == 1000.0 and times["num_frames"] == -1
    assert "media_io_kwargs" not in second
    # the history resent byte for byte, then the turn and the tool's reply with the crop's frames
    assert [json.dumps(m) for m in second["messages"][:2]] == [json.dumps(m) for m in first["messages"]]
    assistant, tool = second["messages"][2:]
    assert assistant == {"role": "assistant", "content": traj.turns[0].assistant} and traj.turns[0].assistant.endswith("</tool_call>")
    assert tool["role"] == "user" and message_text(tool).startswith("<tool_response>\n" + traj.turns[0].observation.text)
    assert message_text(tool).endswith("\n</tool_response>") and "Frames at 1" in message_text(tool)
    (crop,) = parts_of(tool, "video_url")
    assert len(decode_frames(crop["video_url"]["url"])) == 4
    # the trajectory: the script's crop and answer, the server's token counts per turn
    assert traj.failure is None and traj.turns[0].call is not None and traj.prediction == "ABCD"[second["seed"] % 4]
    assert all(set(t.tokens) == {"prompt", "completion"} and t.tokens["prompt"] > 0 and t.tokens["completion"] > 0 for t in traj.turns)
    assert traj.turns[1].tokens["prompt"] > traj.turns[0].tokens["prompt"]


def test_images_mode_sends_one_labelled_image_per_frame(stub, index_sample):
    policy = policy_for(stub, frames="images", frame_times="auto")
    policy.act(first_inputs(index_sample, 1))
    (body,) = stub.bodies
    user = body["messages"][1]
    images = parts_of(user, "image_url")
    labels = [p["text"] for p in parts_of(user, "text")]
    assert len(images) == 4 and all(len(decode_frames(p["image_url"]["url"])) == 1 for p in images)
    assert labels[0].startswith("Frame at ") and labels[1].startswith("\nFrame at ") and "media_io_kwargs" not in body


def test_the_request_renders_to_the_renderers_prompt_text_with_the_checkpoints_template(stub, index_sample, tiny_model_dir):
    """What a server applying the tiny checkpoint's chat template builds from a request is the
    renderer's text (placeholders unexpanded), history and tool turn included; the real vLLM
    test compares the expanded ids."""
    from transformers import AutoProcessor
    from videoseek.agents.prompting import ConversationRenderer

    processor = AutoProcessor.from_pretrained(tiny_model_dir)
    run_rollouts([index_sample], policy_for(stub), env_config=CONFIG, progress=False)
    env = VideoSeekEnv(index_sample, CONFIG)
    obs, info = env.reset(seed=0)
    from videoseek.agents.prompting import assistant_message, tool_message

    messages = initial_messages(obs, info["instructions"])
    turn = stub.bodies[1]["messages"][2]["content"]
    messages.append(assistant_message(turn))
    obs, *_ = env.step(turn)
    messages.append(tool_message(obs))
    expected = ConversationRenderer(processor, tools=info["tools"]).render(messages)["text"]

    def as_template_content(message):  # vLLM's "openai" content format: a video_url part is a video item
        content = message["content"]
        if isinstance(content, list):
            content = [{"type": "video"} if p["type"] == "video_url" else p for p in content]
        return dict(message, content=content)

    served = processor.tokenizer.apply_chat_template([as_template_content(m) for m in stub.bodies[1]["messages"]], chat_template=processor.chat_template,
                                                      tokenize=False, add_generation_prompt=True)  # fmt: skip
    assert served == expected


def test_a_groups_first_turns_share_one_request_with_n_and_sample_as_they_would_alone(stub, index_sample):
    shared = policy_for(stub)
    together = run_rollouts([index_sample], shared, group_size=3, env_config=CONFIG, progress=False)
    first = stub.bodies[0]
    assert first["n"] == 3 and len([b for b in stub.bodies if b["n"] == 3]) == 1 and len(stub.bodies) == 1 + 3
    assert shared.stats["shared_requests"] == 1
    base = stable_seed(0, index_sample.id, 1) % 2**31
    assert sorted(b["seed"] for b in stub.bodies[1:]) == [base, base + 1, base + 2]
    stub.requests.clear()
    alone = run_rollouts([index_sample], policy_for(stub, share_initial=False), group_size=3, env_config=CONFIG, progress=False)
    assert all(b["n"] == 1 for b in stub.bodies) and len(stub.bodies) == 6
    assert [[t.assistant for t in x.turns] for x in together] == [[t.assistant for t in x.turns] for x in alone]
    assert [x.prediction for x in together] == [x.prediction for x in alone]


# ---- throughput and faults -----------------------------------------------------------------------
def test_concurrency_keeps_n_requests_in_flight(index_sample):
    stub = StubServer(delay=0.3)
    try:
        policy = OpenAIPolicy(f"{stub.url}#stub-vl", concurrency=3, share_initial=False)
        inputs = first_inputs(index_sample, 6)
        t0 = time.perf_counter()
        outputs = policy.act(inputs)
        took = time.perf_counter() - t0
    finally:
        stub.stop()
    assert len(outputs) == 6 and stub.max_in_flight == 3 and took < 6 * 0.3
    assert len({r["body"]["seed"] for r in stub.requests}) == 6


def test_429s_5xx_dropped_connections_and_timeouts_are_retried_with_backoff(index_sample):
    def fault(body, count):
        if count == 0:
            return 503, {}
        if count == 1:
            return 429, {"Retry-After": "0"}
        if count == 2:
            return 0, {}  # the connection dropped
        if count == 3:
            time.sleep(0.6)  # past the client's timeout
        return None

    stub = StubServer(fault=fault)
    try:
        policy = OpenAIPolicy(f"{stub.url}#stub-vl", timeout=0.3, retries=4, backoff=0.01)
        (out,) = policy.act(first_inputs(index_sample, 1))
    finally:
        stub.stop()
    assert out.text.endswith("</tool_call>") and out.invalid is None
    assert policy.client().stats["retries"] == 4 and len(stub.requests) == 5


def test_a_refused_request_is_not_retried_and_names_the_status(stub, index_sample):
    policy = OpenAIPolicy(f"{stub.url}#other-model", backoff=0.01)
    with pytest.raises(ServerRefused, match=r"openai:http://127\.0\.0\.1:\d+/v1: the server answered 404 \(The model `other-model` does not exist\.\)"):
        policy.act(first_inputs(index_sample, 1))
    assert len(stub.requests) == 1


def test_a_server_refusing_frame_times_gets_the_labels_alone(index_sample):
    refused = ("Per-request media_io_kwargs are disabled by default because they can change multimodal media loading resource "
               "usage. Start the server with --trust-request-mm-kwargs only when clients are trusted.")  # vLLM 0.31's words
    stub = StubServer(fault=lambda body, count: (400, {}, refused) if "media_io_kwargs" in body else None)
    try:
        policy = OpenAIPolicy(f"{stub.url}#stub-vl", backoff=0.01)
        with pytest.warns(UserWarning, match="refuses per-request media_io_kwargs"):
            (out,) = policy.act(first_inputs(index_sample, 1))
    finally:
        stub.stop()
    assert [("media_io_kwargs" in b) for b in stub.bodies] == [True, False] and out.invalid is None
    assert "labels only" in policy.record()["protocol"]["frame_times_sent"]


def test_a_reply_without_a_usable_turn_is_the_envs_invalid_turn(index_sample):
    replies = iter([None, {"role": "assistant", "content": None}])
    stub = StubServer(reply=lambda body, seed: next(replies, {"role": "assistant", "content": "<answer>B</answer>"}))
    try:
        (traj,) = run_rollouts([index_sample], OpenAIPolicy(f"{stub.url}#stub-vl"), env_config=CONFIG, progress=False)
    finally:
        stub.stop()
    first, second, third = traj.turns
    assert first.action["type"] == "invalid" and "no choice" in first.error and first.assistant == ""
    assert second.action["type"] == "invalid" and "no text" in second.error
    assert third.action["type"] == "answer" and traj.failure is None and traj.prediction == "B"


def test_native_tool_calls_map_back_to_the_envs_actions(stub, index_sample):
    call = {"id": "call_7", "type": "function", "function": {"name": "crop_video", "arguments": '{"start": 12, "end": 14}'}}

    def reply(body, seed):
        if any(m["role"] == "tool" for m in body["messages"]):
            return {"role": "assistant", "content": "<answer>B</answer>"}
        return {"role": "assistant", "content": "<think>clue</think>", "tool_calls": [call]}

    stub.reply = reply
    policy = policy_for(stub, tool_protocol="native", cache=None)
    (traj,) = run_rollouts([index_sample], policy, env_config=CONFIG, progress=False)
    first, second = stub.bodies
    env = VideoSeekEnv(index_sample, CONFIG)
    _, info = env.reset(seed=0)
    assert first["tools"] == info["tools"] and first["tool_choice"] == "auto" and first["parallel_tool_calls"] is False
    assert first["messages"][0]["content"] == info["instructions"]  # the server's template lists the tools
    mapped = '<think>clue</think><tool_call>{"name": "crop_video", "arguments": {"start": 12, "end": 14}}</tool_call>'
    assert traj.turns[0].assistant == mapped and traj.turns[0].call is not None and traj.turns[0].call.tool == "crop_video"
    assistant, tool = second["messages"][2:]
    assert assistant == {"role": "assistant", "content": "<think>clue</think>", "tool_calls": [call]}
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_7" and len(parts_of(tool, "video_url")) == 1
    assert policy.stats["native_calls"] == 1 and policy.record()["protocol"]["tool_protocol"] == "native"


def test_judge_and_policy_share_the_clients_retries():
    from videoseek.agents.judge import OpenAIJudge

    stub = StubServer(fault=lambda body, count: (502, {}) if count == 0 else None, reply=lambda body, seed: {"role": "assistant", "content": "2"})
    try:
        judge = OpenAIJudge(stub.url, "stub-vl", "system", "{} {} {}", backoff=0.01)
        assert judge("q", "r", "c") == "2" and judge._client.stats["retries"] == 1
    finally:
        stub.stop()


# ---- the CLI: records, failures and their resume, replay with the server down ------------------------
def rollout(data, out, spec, *extra):
    return main(["rollout", "--data", str(data), "--policy", spec, "--out", str(out), "--no-progress", "--group-size", "2", *ENV_FLAGS, *extra])


def test_rollout_records_the_endpoint_never_the_key_and_replays_offline(stub, index_sample, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VIDEOSEEK_TEST_KEY", "sk-secret-123")
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    run = tmp_path / "run"
    spec = f"openai:{stub.url}#stub-vl"
    assert rollout(data, run, spec, "--temperature", "0.7", "--api-key-env", "VIDEOSEEK_TEST_KEY", "--concurrency", "2") == 0
    assert {r["authorization"] for r in stub.requests} == {"Bearer sk-secret-123"}
    record = json.loads((run / "run.json").read_text())
    served = record["served"]
    assert served["endpoint"]["url"] == stub.url and served["model"] == "stub-vl" and served["endpoint"]["api_key_env"] == "VIDEOSEEK_TEST_KEY"
    assert served["decoding"]["temperature"] == 0.7 and served["protocol"]["frames"] == "video" and served["protocol"]["tool_protocol"] == "text"
    assert served["concurrency"] == 2 and served["stats"]["requests"] == 1 + 2  # one shared first turn, two second turns
    assert "sk-secret-123" not in (run / "run.json").read_text() and "sk-secret-123" not in (run / CACHE_FILE).read_text()
    cached = [json.loads(line) for line in (run / CACHE_FILE).read_text().splitlines()]
    assert len(cached) == 4 and {c["episode_id"] for c in cached} == {f"{index_sample.id}/g0", f"{index_sample.id}/g1"}
    original = sorted(read_trajectories(run), key=lambda t: t.episode_id)
    assert all(t.failure is None and t.turns[0].tokens for t in original)
    assert main(["eval", str(run)]) == 0
    capsys.readouterr()

    sent = len(stub.requests)
    stub.stop()  # the server down: the replay answers from the recorded responses
    again = tmp_path / "again"
    assert main(["rollout", "--from-run", str(run), "--out", str(again), "--no-progress"]) == 0
    replayed = sorted(read_trajectories(again), key=lambda t: t.episode_id)
    assert len(stub.requests) == sent
    assert [[(u.assistant, u.tokens) for u in t.turns] for t in replayed] == [[(u.assistant, u.tokens) for u in t.turns] for t in original]
    assert [(t.prediction, t.reward, t.advantage) for t in replayed] == [(t.prediction, t.reward, t.advantage) for t in original]
    assert json.loads((again / "run.json").read_text())["served"]["cache"]["offline"] is True
    assert len((again / CACHE_FILE).read_text().splitlines()) == 4  # the new run replays on its own


def test_failed_requests_fail_their_episodes_only_and_a_rerun_resumes_them(index_sample, tmp_path, capsys):
    other = index_sample.model_copy(update={"id": "idx-2", "question": "Which colour comes second?"})
    broken = {"on": True}
    stub = StubServer(fault=lambda body, count: (500, {}) if broken["on"] and "comes second" in json.dumps(body["messages"]) else None)
    try:
        data = write_jsonl([index_sample, other], tmp_path / "samples.jsonl")
        run = tmp_path / "run"
        spec = f"openai:{stub.url}#stub-vl"
        assert rollout(data, run, spec, "--retries", "1") == 1
        err = capsys.readouterr().err
        assert "episode idx-2/g0 (sample idx-2) failed: policy: ServerRefused: openai:" in err and "answered 500 (stub fault 500) after 2 tries" in err
        assert "2 of 4 episodes failed" in err
        trajs = {t.episode_id: t for t in read_trajectories(run)}
        assert trajs["idx-1/g0"].failure is None and trajs["idx-1/g1"].failure is None and "500" in trajs["idx-2/g1"].failure
        # each failing request was tried twice, in the batch; the driver's one-by-one retry asked nothing again
        assert sum("comes second" in json.dumps(b["messages"]) for b in stub.bodies) == 2
        broken["on"] = False
        before = len(stub.requests)
        assert rollout(data, run, spec, "--retries", "1") == 0
        assert "resuming 2 failed episode(s)" in capsys.readouterr().err
        assert all("comes second" in json.dumps(b["messages"]) for b in stub.bodies[before:])  # only the failed sample ran again
        trajs = {t.episode_id: t for t in read_trajectories(run)}
        assert len(trajs) == 4 and all(t.failure is None for t in trajs.values())
    finally:
        stub.stop()


def test_bad_served_flags_are_one_line_errors(tmp_path, index_sample, capsys):
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    cases = [
        (["--policy", "openai:localhost:8000"], "openai:localhost:8000: expected openai:http(s)://HOST:PORT/v1[#MODEL]"),
        (["--policy", "openai:http://127.0.0.1:9/v1", "--concurrency", "0"], "--concurrency must be at least 1, got 0"),
        (["--policy", "openai:http://127.0.0.1:9/v1", "--openai-extras", "none", "--top-k", "5"], "top_k is not an OpenAI API field"),
    ]
    for extra, message in cases:
        assert main(["rollout", "--data", str(data), "--out", str(tmp_path / "x"), "--no-progress", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err


def test_a_replay_miss_fails_the_episode_without_a_server(index_sample, tmp_path):
    policy = OpenAIPolicy("http://127.0.0.1:9/v1#stub-vl", replay=[tmp_path / "none.jsonl"], offline=True)
    with pytest.raises(OpenAIError, match="no recorded response for this request"):
        policy.act(first_inputs(index_sample, 1))


# ---- pieces ----------------------------------------------------------------------------------------
def test_the_response_cache_skips_a_line_cut_by_a_kill_and_copies_replayed_responses_once(tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"key": "a", "response": {"choices": []}}) + "\n" + '{"key": "b", "respo')
    cache = ResponseCache(tmp_path / "new.jsonl", replay=[old])
    assert "a" in cache and "b" not in cache and len(cache) == 1
    cache.put("a", cache.get("a"), turn=0)
    cache.put("a", cache.get("a"), turn=0)
    assert len((tmp_path / "new.jsonl").read_text().splitlines()) == 1


def test_stop_strings_are_put_back():
    stops = ("</tool_call>", "</answer>")
    assert close_open_tag('<tool_call>{"name": "x"}', stops, "</tool_call>") == '<tool_call>{"name": "x"}</tool_call>'
    assert close_open_tag("<answer>B</answer>", stops, "</answer>") == "<answer>B</answer>"
    assert close_open_tag("<think>x</think>", stops) == "<think>x</think>"


def test_endpoints_and_keys():
    assert Endpoint("http://h/v1").record()["api_key_env"] == "OPENAI_API_KEY"
    with pytest.raises(ValueError, match="api_key_env must name an environment variable"):
        Endpoint("http://h/v1", api_key_env="sk-123-abc")
    client = OpenAIClient(Endpoint("http://127.0.0.1:9/v1", retries=0))
    with pytest.raises(OpenAIError, match=r"cannot reach the server \(ConnectError"):
        client.post("/chat/completions", {"model": "x"})
    client.close()


def test_served_chat_template_writes_qwen3_vl_videos_bare():
    assert "<|vision_start|><|video_pad|><|vision_end|>" in served_chat_template("qwen2.5-vl")
    q3 = served_chat_template("qwen3-vl")
    assert "<|vision_start|><|video_pad|><|vision_end|>" not in q3 and "{{- '<|video_pad|>' -}}" in q3


def test_the_look_on_probe_hands_a_served_policy_two_missed_crops(stub, index_sample, tmp_path):
    """`--look-on-probe` with `openai:`: the episode's start writes two missed crops, the served model
    plays on, and the run still records the endpoint."""
    data = write_jsonl([index_sample], tmp_path / "samples.jsonl")
    run = tmp_path / "probe"
    assert rollout(data, run, f"openai:{stub.url}#stub-vl", "--look-on-probe") == 0
    assert json.loads((run / "run.json").read_text())["served"]["model"] == "stub-vl"
    (a, b), = index_sample.clue_intervals
    for t in read_trajectories(run):
        assert [u.call.end <= a or u.call.start >= b for u in t.turns[:2]] == [True, True] and not t.turns[0].tokens
        assert [u.forced for u in t.turns[:3]] == [True, True, False]
        assert t.turns[2].tokens  # the served model's turn (the stub answers once it has seen a tool response)
    first = stub.requests[0]["body"]["messages"]  # the server is first asked after the probe's two crops
    assert sum(m["role"] == "assistant" for m in first) == 2
