"""`videoseek.integrations.trl` through TRL's real `GRPOTrainer` (TRL 1.16) on CPU.

Two real GRPO steps with the tiny Qwen2.5-VL (no vLLM): TRL renders the prompts with the model's
processor, generates with `model.generate`, parses the tool calls with its response parser, runs
`VideoSeekTRLEnv.crop_video`, appends the returned frames as images, scores the sequence in the
model's forward and steps the optimizer. The policy is scripted: a logits processor forces each
turn's text into the tiny model's own `generate` (a random model writes no tool calls), so every
other piece is TRL's. The checks: the frames the env returned are the images in the sequence TRL
scores (pixel values equal to the image processor's output for the env's frames, and as many
image tokens as their features, so TRL's silent drop of every image on a mismatch did not
happen), and each rollout's reward is the env's.

The env offers TRL one method per configured tool (crop_video, zoom, the one-file custom tool
`frame_at`), with the tool's schema, and none for a tool it does not have; a GRPO step with zoom
and `frame_at` runs both through TRL's own tool loop.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from PIL import Image  # noqa: E402

from videoseek.envs.env import EnvConfig  # noqa: E402
from videoseek.envs.sample import DataError, VideoSample, write_jsonl  # noqa: E402
from videoseek.envs.trajectory import Trajectory  # noqa: E402
from videoseek.integrations.trl import (  # noqa: E402
    TrajectoryRecorder,
    VideoSeekTRLEnv,
    add_response_schema,
    advertised_schema,
    environment_factory,
    sample_from_row,
    sample_row,
    samples_dataset,
    videoseek_reward,
)
from videoseek.rewards import score_episode  # noqa: E402
from videoseek.viewer.server import ViewerApp  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ENV_CONFIG = EnvConfig(initial_frames=2, frames_per_call=2, max_pixels=56 * 56, max_turns=4)
# The scripted policy: each sample's turns, chosen by the question in the prompt and the number of
# tool responses so far; the second generation of a prompt opens with its `FIRST_TURNS` variant, so
# a group's rewards differ and GRPO has a gradient. Sample 2's first call is malformed (a start
# that is not a time) in its first generation.
SCRIPTS = {
    "Which colour flashes?": [
        '<think>The flash is between the sparse frames.</think><tool_call>{"name": "crop_video", "arguments": {"start": 12.0, "end": 13.5}}</tool_call>',
        "<think>At 12.5s it is green.</think><answer>B</answer>",
    ],
    "Which shape moves?": [
        '<think>Look early.</think><tool_call>{"name": "crop_video", "arguments": {"start": "abc", "end": 3}}</tool_call>',
        '<think>Again.</think><tool_call>{"name": "crop_video", "arguments": {"start": 2.0, "end": 4.0}}</tool_call>',
        "<think>A circle at 3.0s.</think><answer>A</answer>",
    ],
}


FIRST_TURNS = {
    "Which colour flashes?": '<think>Whole video.</think><tool_call>{"name": "crop_video", "arguments": {"start": 0.0, "end": 20.0}}</tool_call>',
    "Which shape moves?": '<think>Look early.</think><tool_call>{"name": "crop_video", "arguments": {"start": 2.0, "end": 4.0}}</tool_call>',
}


def samples(video: str) -> list[VideoSample]:
    common = {"video": video, "options": ["A. circle", "B. green", "C. blue", "D. red"]}
    return [
        VideoSample(id="s1", question="Which colour flashes?", answer="B", clue_intervals=[(12.0, 13.5)],
                    key_frames=[{"time": 12.5, "boxes": {"flash": [0.1, 0.1, 0.5, 0.5]}}], **common),
        VideoSample(id="s2", question="Which shape moves?", answer="A", clue_intervals=[(2.0, 4.0)],
                    key_frames=[{"time": 3.0, "boxes": {"circle": [0.2, 0.2, 0.4, 0.4]}}], metadata={"task_kind": "motion"}, **common),
    ]  # fmt: skip


@pytest.fixture
def samples_file(tmp_path, index_video):
    return write_jsonl(samples(str(index_video)), tmp_path / "samples.jsonl")


# ---- the adapter's pieces ---------------------------------------------------------------------
CUSTOM = "examples/custom_tool.py:FrameAtTool"  # the one-file tool, by its path from the repository root


def public_methods(env) -> list[str]:
    """The methods TRL offers as tools: it lists the public functions of the instance's class, less `reset`."""
    import inspect

    return [n for n, _ in inspect.getmembers(type(env), inspect.isfunction) if not n.startswith("_") and n not in ("reset", "get_reward")]


@pytest.mark.parametrize("tools", [["crop_video"], ["crop_video", "zoom"], ["zoom"], [CUSTOM], ["crop_video", "zoom", CUSTOM], []])
def test_one_public_method_per_configured_tool_whose_schema_is_the_tools(tools, monkeypatch):
    from transformers.utils import get_json_schema
    from transformers.utils.chat_template_utils import render_jinja_template

    from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE
    from videoseek.envs.tools import get_tool, tool_names

    monkeypatch.chdir(REPO)  # the custom tool's path is relative to the repository root
    env = VideoSeekTRLEnv(ENV_CONFIG.model_copy(update={"tools": tools}))
    names = tool_names(tools)
    assert isinstance(env, VideoSeekTRLEnv) and public_methods(env) == sorted(names)
    for name in {"crop_video", "zoom", "frame_at"} - set(names):
        assert not hasattr(env, name)  # a tool that is not configured is not offered
    for name in names:
        tool = get_tool(name)
        made = get_json_schema(getattr(env, name))  # what TRL's chat template renders for the method
        if name == "zoom":  # a type hint cannot say "4 numbers": the rest of the schema is the tool's
            expected = tool.schema()
            for key in ("minItems", "maxItems"):
                del expected["function"]["parameters"]["properties"]["box"][key]
            assert made == expected == advertised_schema(tool)
        else:
            assert made == tool.schema() == advertised_schema(tool)
    # The system message TRL renders from the bound methods (in name order: TRL lists them sorted) is
    # the one the tools' advertised schemas give.
    system = [[{"role": "system", "content": "s"}]]
    methods = [getattr(env, n) for n in public_methods(env)]
    schemas = [advertised_schema(get_tool(n)) for n in sorted(names)]
    assert render_jinja_template(conversations=system, tools=methods or None, chat_template=VIDEOSEEK_CHAT_TEMPLATE)[0] == \
        render_jinja_template(conversations=system, tools=schemas or None, chat_template=VIDEOSEEK_CHAT_TEMPLATE)[0]  # fmt: skip


def test_zoom_and_the_custom_tool_step_the_env_and_bad_calls_cost_a_turn(samples_file, monkeypatch):
    monkeypatch.chdir(REPO)
    config = ENV_CONFIG.model_copy(update={"tools": ["crop_video", "zoom", CUSTOM], "max_turns": 6})
    ds = samples_dataset(samples_file, config)
    env = VideoSeekTRLEnv(config)
    env.reset(**ds[0])
    assert ds[0]["prompt"][0] == {"role": "system", "content": env.env.instructions}  # the prompt teaches the offered tools
    assert "frame_at" in env.env.instructions and "zoom" in env.env.instructions
    zoomed = env.zoom(12.5, [0.1, 0.1, 0.5, 0.5])
    assert [b["type"] for b in zoomed].count("image") == 1 and zoomed[0]["text"].startswith("zoom returned the frame at")
    framed = env.frame_at(time=3.0)
    assert [b["type"] for b in framed].count("image") == 1 and framed[0]["text"].startswith("frame_at returned the frame at 3.0s")
    # What the schema TRL advertises cannot say, and what TRL would pass as it came, the env refuses: a turn, no exception.
    for blocks in (env.zoom(12.5, [0.1, 0.1, 0.5]), env.frame_at(), env.frame_at(time=3.0, extra=1)):
        assert [b["type"] for b in blocks] == ["text"] and blocks[0]["text"].startswith("Error"), blocks
    traj = env.env.trajectory
    assert [c.tool for c in traj.calls] == ["zoom", "frame_at"] and traj.invalid_calls == 3 and env.frames_returned == 2 + 2
    assert traj.calls[0].box == [0.1, 0.1, 0.5, 0.5] and traj.calls[1].arguments == {"time": 3.0}
    logged: dict[str, float] = {}
    videoseek_reward([[{"role": "assistant", "content": "<answer>B</answer>"}]], [env], log_metric=logged.__setitem__)
    assert logged["videoseek/calls"] == 2 and logged["videoseek/calls/zoom"] == 1 == logged["videoseek/calls/frame_at"]
    assert logged["videoseek/calls/crop_video"] == 0  # configured and never called: the collapse signal is logged too


def test_a_tool_trl_cannot_offer_is_refused_when_the_class_is_made(monkeypatch):
    from videoseek.envs.tools import base

    monkeypatch.setattr(base, "TOOLS", dict(base.TOOLS))  # the probes leave the registry as it was
    Tool, register_tool = base.Tool, base.register_tool

    @register_tool
    class Undescribed(Tool):
        name = "undescribed_trl_probe"
        description = "A tool whose argument has no description."
        parameters = {"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]}

    @register_tool
    class Reset(Tool):
        name = "reset"
        description = "Shadows the env's reset."

    for name, match in (("undescribed_trl_probe", "TRL would advertise a schema other than the tool's.*description"),
                        ("reset", "cannot be a method of VideoSeekTRLEnv")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            environment_factory(EnvConfig(tools=[name]))


def test_rows_round_trip_through_arrow_and_reset_clears_the_pooled_instance(samples_file):
    ds = samples_dataset(samples_file)
    assert ds.column_names[0] == "prompt" and len(ds) == 2
    originals = {s.id: s for s in VideoSample.from_jsonl(samples_file)}
    for row in ds:
        assert sample_from_row(row) == originals[row["id"]]  # key_frames' box names differ per row
    env = VideoSeekTRLEnv(ENV_CONFIG)
    first = env.reset(**ds[0])
    assert [b["type"] for b in first].count("image") == 2 and originals[ds[0]["id"]].question in first[-1]["text"]
    blocks = env.crop_video(12.0, 13.5)
    assert [b["type"] for b in blocks].count("image") == 2 and env.frames_returned == 4
    env._finish("<think>x</think><answer>B</answer>")
    env.reset(**ds[1])  # the pooled instance starts over: no turns, no result, two frames
    assert env.env.trajectory.turns == [] and env.result is None and env.frames_returned == 2
    assert env.env.sample.id == ds[1]["id"]


def test_malformed_calls_cost_a_turn_and_never_raise(samples_file):
    env = VideoSeekTRLEnv(ENV_CONFIG)
    env.reset(**samples_dataset(samples_file)[0])
    for start, end in [("abc", 3), (5.0, 2.0), (None, {"x": 1}), ("<|image_pad|>", 2)]:
        blocks = env.crop_video(start, end)
        assert [b["type"] for b in blocks] == ["text"] and blocks[0]["text"].startswith("Error")
        assert "<|image_pad|>" not in blocks[0]["text"]
    traj = env.env.trajectory
    assert len(traj.turns) == 4 and traj.invalid_calls == 4 and traj.truncated  # max_turns=4 spent
    assert env.crop_video(12.0, 13.5)[0]["text"].startswith("The episode has ended")
    total, components = env._finish("<answer>B</answer>")  # already over: the env's truncated score
    assert total == traj.reward and components == traj.reward_components


def test_a_rollout_without_an_answer_is_scored_truncated(samples_file):
    env = VideoSeekTRLEnv(ENV_CONFIG)
    env.reset(**samples_dataset(samples_file)[0])
    env.crop_video(12.0, 13.5)
    total, components = env._finish("<think>still looking</think>")
    summary = env.env.summary()
    assert summary.truncated and env.env.trajectory.truncated
    assert (total, components) == score_episode(env.env.sample, summary, ENV_CONFIG.reward)


def test_bad_row_fails_at_load_with_file_row_and_field(tmp_path, index_video):
    path = tmp_path / "bad.jsonl"
    good = samples(str(index_video))[0].to_json_row()
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "s9", "clue_intervals": [[5, 2]]}) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:2 \(sample s9\): field 'clue_intervals"):
        samples_dataset(path)
    with pytest.raises(DataError, match="field 'answer'"):
        sample_from_row({k: v for k, v in sample_row(samples(str(index_video))[0]).items() if k != "answer"})


def test_group_presets_are_refused():
    for preset in ("dmgrpo", "tgrpo", "processthinker"):
        with pytest.raises(ValueError, match="group engine"):
            environment_factory(EnvConfig(reward=preset))


# ---- two real GRPO steps ----------------------------------------------------------------------
class ScriptedTurns:
    """A logits processor that forces each row's scripted turn (then `<|im_end|>`)."""

    def __init__(self, tokenizer, scripts=SCRIPTS, first_turns=FIRST_TURNS):
        self.tokenizer, self.start, self.targets = tokenizer, None, None
        self.scripts, self.first_turns = scripts, first_turns
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def target(self, row, b: int) -> list[int]:
        text = self.tokenizer.decode(row, skip_special_tokens=False)
        question = next(q for q in self.scripts if q in text)
        k = text.count("<tool_response>")
        # The first turn sees the whole batch, each prompt's generations side by side.
        turn = self.first_turns[question] if k == 0 and b % 2 else self.scripts[question][k]
        return self.tokenizer(turn, add_special_tokens=False)["input_ids"] + [self.end]

    def __call__(self, input_ids, scores):
        if self.start is None:
            self.start, self.targets = input_ids.shape[1], [self.target(row, b) for b, row in enumerate(input_ids)]
        k = input_ids.shape[1] - self.start
        forced = torch.full_like(scores, float("-inf"))
        for b, target in enumerate(self.targets):
            forced[b, target[k] if k < len(target) else self.end] = 0.0
        return forced


@pytest.mark.slow
def test_two_grpo_steps_frames_reach_the_scored_forward_and_rewards_are_the_envs(samples_file, tiny_model_dir, tmp_path, single_thread_torch):
    from transformers import AutoModelForImageTextToText, AutoProcessor, LogitsProcessorList
    from trl import GRPOConfig, GRPOTrainer

    processor = add_response_schema(AutoProcessor.from_pretrained(tiny_model_dir))
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    generate = model.generate
    model.generate = lambda *a, **kw: generate(*a, logits_processor=LogitsProcessorList([ScriptedTurns(processor.tokenizer)]), **kw)

    expected: list[dict] = []  # per batch: what the envs returned, recorded when TRL scores the rollouts

    def reward(completions, environments, **kwargs):
        values = videoseek_reward(completions, environments, **kwargs)
        rows = []
        for e, value in zip(environments, values):
            frames = [Image.fromarray(f) for turn in sorted(e.env.frames_by_turn) for f in e.env.frames_by_turn[turn]]
            pixels = processor.image_processor(images=frames, return_tensors="pt")["pixel_values"]
            rows.append({"frames": len(frames), "pixels": pixels, "reward": value, "sample": e.env.sample.id, "traj": e.env.trajectory.model_copy(deep=True)})
        expected.append(rows)
        return values

    scored: list[dict] = []

    def capture(module, args, kwargs):
        if "labels" in kwargs:  # TRL's scoring forwards pass labels; generation does not
            scored.append({k: kwargs.get(k) for k in ("input_ids", "pixel_values", "image_grid_thw", "mm_token_type_ids")})

    model.register_forward_pre_hook(capture, with_kwargs=True)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=2, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=1024, learning_rate=1e-4, beta=0.0, logging_steps=1, save_strategy="no", report_to=[],
        seed=0, temperature=1.0, top_k=0, dataloader_num_workers=0,
    )  # fmt: skip
    trainer = GRPOTrainer(model=model, processing_class=processor, args=args, train_dataset=samples_dataset(samples_file),
                          environment_factory=environment_factory(ENV_CONFIG), reward_funcs=[reward])  # fmt: skip
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()

    assert len(expected) == 2 and trainer.state.global_step == 2 and len(scored) == 2  # one scored forward per step
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())  # the optimizer stepped
    image_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    start_id = processor.tokenizer.convert_tokens_to_ids("<|vision_start|>")
    merge = processor.image_processor.merge_size**2
    for batch, forward in zip(expected, scored):  # the first scored forward after each batch's rewards
        ids, grid = forward["input_ids"], forward["image_grid_thw"]
        assert forward["pixel_values"] is not None, "TRL dropped the images from its scoring forward"
        assert int((ids == image_id).sum()) == int(grid.prod(-1).sum()) // merge
        assert int((forward["mm_token_type_ids"] == 1).sum()) == int((ids == image_id).sum())
        # TRL shuffles a generation batch's rows (with their images) before scoring: match each
        # scored row to the episode whose frames it holds, pixel for pixel, one row per episode.
        patches = torch.split(forward["pixel_values"], grid.prod(-1).tolist())
        unmatched = list(batch)
        first = 0
        for row in ids:
            n = int((row == start_id).sum())  # one <|vision_start|> per image
            pixels = torch.cat(patches[first : first + n])
            first += n
            match = next((k for k, e in enumerate(unmatched) if e["frames"] == n and torch.equal(e["pixels"], pixels)), None)
            assert match is not None, "a scored row holds images that are not an episode's frames"
            unmatched.pop(match)
        assert first == len(patches) and not unmatched
        for e in batch:
            traj = e["traj"]
            assert e["reward"] == traj.reward and traj.terminated and traj.correct
            assert e["reward"] == pytest.approx(score_episode(traj, env_summary(traj), ENV_CONFIG.reward)[0])
        malformed = [e["traj"] for e in batch if e["sample"] == "s2" and e["traj"].turns[0].error]
        assert malformed, "the batch had no malformed call"
        for traj in malformed:  # it cost a turn: an error observation without frames, counted as invalid
            assert traj.invalid_calls == 1 and len(traj.turns) == 3 and not traj.turns[0].observation.frames
        assert sorted({(c.start, c.end) for e in batch if e["sample"] == "s1" for c in e["traj"].calls}) == [(0.0, 20.0), (12.0, 13.5)]
    # The rewards TRL trained on (its completions table keeps the last step's, as float32) are the env's.
    assert sorted(trainer._logs["rewards"]["reward"]) == pytest.approx(sorted(e["reward"] for e in expected[-1]))
    logged = trainer.state.log_history[0]
    assert logged["tools/failure_frequency"] == 0.0 and logged["tools/call_frequency"] > 1.0 and logged["frac_reward_zero_std"] < 1
    assert "videoseek/clue_seek" in logged


def env_summary(traj):
    """The `EpisodeSummary` of a recorded trajectory, as `VideoSeekEnv.summary` forms it."""
    from videoseek.rewards import EpisodeSummary

    return EpisodeSummary(
        prediction=traj.prediction,
        assistant_turns=[t.assistant for t in traj.turns],
        calls=[(c.start, c.end) for c in traj.calls],
        invalid_calls=traj.invalid_calls,
        duration=traj.duration,
        truncated=traj.truncated,
    )


# ---- zoom and the one-file tool through TRL's own tool loop -------------------------------------
TOOL_SCRIPT = [
    '<think>Zoom on the flash.</think><tool_call>{"name": "zoom", "arguments": {"time": 12.5, "box": [0.1, 0.1, 0.5, 0.5]}}</tool_call>',
    '<think>And one frame.</think><tool_call>{"name": "frame_at", "arguments": {"time": 3.0}}</tool_call>',
    "<think>Seen.</think><answer>B</answer>",
]


@pytest.mark.slow
def test_a_grpo_step_runs_zoom_and_the_custom_tool_through_trl(samples_file, tiny_model_dir, tmp_path, single_thread_torch, monkeypatch):
    from transformers import AutoModelForImageTextToText, AutoProcessor, LogitsProcessorList
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.chdir(REPO)
    config = ENV_CONFIG.model_copy(update={"tools": ["crop_video", "zoom", CUSTOM]})
    processor = add_response_schema(AutoProcessor.from_pretrained(tiny_model_dir))
    model = AutoModelForImageTextToText.from_pretrained(tiny_model_dir)
    generate = model.generate
    scripts = {q: TOOL_SCRIPT for q in SCRIPTS}
    model.generate = lambda *a, **kw: generate(*a, logits_processor=LogitsProcessorList([ScriptedTurns(processor.tokenizer, scripts, {q: TOOL_SCRIPT[0] for q in SCRIPTS})]), **kw)
    episodes: list = []

    def reward(completions, environments, **kwargs):
        values = videoseek_reward(completions, environments, **kwargs)
        episodes.extend(e.env.trajectory.model_copy(deep=True) for e in environments)
        return values

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=1, per_device_train_batch_size=4, num_generations=2,
        max_completion_length=1024, learning_rate=1e-4, beta=0.0, logging_steps=1, save_strategy="no", report_to=[], seed=0, dataloader_num_workers=0,
    )  # fmt: skip
    recorder = TrajectoryRecorder(args.output_dir, config, data=samples_file, model=tiny_model_dir)
    trainer = GRPOTrainer(model=model, processing_class=processor, args=args, train_dataset=samples_dataset(samples_file, config),
                          environment_factory=environment_factory(config, recorder=recorder), reward_funcs=[reward],
                          callbacks=[recorder])  # fmt: skip
    trainer.train()
    assert len(episodes) == 4
    for traj in episodes:  # TRL parsed each call, ran the method of its tool, and the env recorded it
        assert [c.tool for c in traj.calls] == ["zoom", "frame_at"] and traj.invalid_calls == 0 and traj.terminated
        assert [len(t.observation.frames) for t in traj.turns] == [1, 1, 0]
    logged = trainer.state.log_history[0]
    assert logged["tools/failure_frequency"] == 0.0 and logged["videoseek/calls/zoom"] == 1.0 == logged["videoseek/calls/frame_at"]
    assert logged["videoseek/calls/crop_video"] == 0.0

    # The recorder left the run as the viewer reads one: the run record and the step's episodes.
    run = Path(args.output_dir)
    record = json.loads((run / "run.json").read_text())
    assert record["command"] == "trl-grpo" and record["env"]["tools"] == config.tools and record["decoding"]["seed"] == 0
    assert record["model"]["weights_sha256"] and record["data_files"][0]["sha256"] and record["group_size"] == 2
    written = [Trajectory.model_validate_json(line) for line in (run / "rollouts" / "step_0001" / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(t.reward for t in written) == pytest.approx(sorted(t.reward for t in episodes))
    assert sorted(t.episode_id for t in written) == ["s1/g0", "s1/g1", "s2/g0", "s2/g1"] and {t.group.id for t in written} == {"s1", "s2"}
    assert all((run / "rollouts" / "step_0001" / f.path).is_file() for t in written for turn in t.turns for f in turn.observation.frames)
    app = ViewerApp([run])
    try:
        assert app.api_training({"run": ["A"]})["steps"] == [1]
        episode = app.api_episode({"run": ["A@s1"], "i": ["0"]})["episode"]
        assert episode["reward_explained"]["known"] and episode["reward_explained"]["source"] == str(run / "run.json")
        assert episode["reward_explained"]["matches"] is True
    finally:
        app.close()
