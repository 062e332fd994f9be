"""Benchmark: the CPU time of one `VideoSeekAgentLoop` episode over its floor, side by side in one run.

The floor is what an episode cannot avoid: decoding its frames (the same backend call on the same
frame indices at the same served size, fresh reader) plus one processor pass over them (the
video processor once per video, as the episode's turns bring them). The episode is the verl
driver's own `_episode` (env reset and steps, rendering, token checks) against a scripted server
that answers instantly, cold each time (empty frame cache, fresh reader, empty encoding cache).
CPU time is the process's (`time.process_time`), alternated floor / episode, median of repeats.

Cases (the 7B config: 16 initial frames, crops of 8 frames, 392x392 pixels): 720p 60 s with
B-frames and 5 crops; 1080p 10 min (one encoded minute repeated) and 5 crops; 720p with
max_turns 10 and 9 crops (16 + 9x8 frames). Targets: <= 1.10x, and <= 1.20x for 10 turns. Also
prints the render time of the last turn over the first (flat: no cost grows with the turns).

    python bench/bench_agent_loop.py [--repeats 3] [--backend pyav]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_videos import encoded_minute, repeat_video  # noqa: E402

from videoseek.agents import prompting  # noqa: E402
from videoseek.agents.groups import origin_plan  # noqa: E402
from videoseek.agents.prompting import EncodingCache, frames_metadata, schemas_of  # noqa: E402
from videoseek.agents.tiny_model import ensure_tiny_model  # noqa: E402
from videoseek.envs import video as video_mod  # noqa: E402
from videoseek.envs.env import EnvConfig  # noqa: E402
from videoseek.envs.sample import VideoSample  # noqa: E402
from videoseek.envs.tools import DEFAULT_TOOLS, get_tool  # noqa: E402
from videoseek.training.verl_plugin.agent_loop import LoopOptions, VideoSeekAgentLoop, shared_renderer  # noqa: E402


SPAN_TOOL = get_tool(DEFAULT_TOOLS[0])  # the default tool, which retrieves the frames of a time span


class ScriptedServer:
    """verl's server manager answering each turn at once: crop after crop, then an answer."""

    def __init__(self, tokenizer, crops):
        self.tokenizer, self.crops, self.end = tokenizer, crops, tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def generate(self, request_id, prompt_ids, sampling_params, video_data=None, mm_processor_kwargs=None):
        from verl.workers.rollout.replica import TokenOutput

        turn = sum(1 for t in prompt_ids if t == self.end) // 2 - 1  # system+user close 2; each turn adds 2
        if 0 <= turn < len(self.crops):
            s, e = self.crops[turn]
            text = SPAN_TOOL.call_text({"start": s, "end": e})
        else:
            text = "<answer>A</answer>"
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False) + [self.end], extra_fields={})


def make_loop(processor, config: EnvConfig, crops) -> VideoSeekAgentLoop:
    """The agent loop's episode machinery without verl's worker around it (no config, no Ray):
    the attributes `_episode` reads, set as `VideoSeekAgentLoop.__init__` sets them."""
    loop = object.__new__(VideoSeekAgentLoop)
    loop.options = LoopOptions(env=config, max_turn_tokens=256)
    loop.env_config = config.model_copy(update={"reward": loop.options.reward})
    loop.processor, loop.tokenizer = processor, processor.tokenizer
    loop.tool_schemas = schemas_of(config.tools)
    loop.renderer = shared_renderer(processor, None, None, loop.tool_schemas)
    loop.renderer.cache = EncodingCache(loop.renderer.cache.max_bytes)  # cold
    loop.mm_processor_kwargs = None
    loop.end_of_turn_id = loop.renderer.end_of_turn_id
    loop.forbidden_ids = {loop.renderer.image_token_id, loop.renderer.video_token_id}
    loop.prompt_length, loop.response_length = 1 << 20, 1 << 20
    loop.server_manager = ScriptedServer(processor.tokenizer, crops)
    loop.episode_dump = None
    return loop


def cold() -> None:
    video_mod.FRAME_CACHE.clear()
    video_mod._READERS.clear()


def episode(processor, sample, config, crops):
    loop = make_loop(processor, config, crops)
    result = asyncio.run(loop._episode(sample, {"temperature": 1.0}, origin_plan(sample, 0, 0)))
    assert result.failure is None and result.tool_turns == len(crops), (result.failure, result.tool_turns)
    return result


def floor(processor, sample, config, result):
    """Decode the episode's frames (same indices, same size, fresh reader) + the processor once per video."""
    reader = video_mod.VideoReader(sample.video, backend=config.video_backend, cache=video_mod.FrameCache())
    size = video_mod.fit_pixels(reader.info.width, reader.info.height, config.max_pixels)
    renderer = shared_renderer(processor, None, None, config.tools)
    for frames, meta in result.videos:
        idx = reader.indices_at([t / 1000 for t in meta["frames_indices"]])
        decoded = reader._src.decode(list(idx), size)
        processor.video_processor(videos=[decoded], video_metadata=[frames_metadata(reader.frame_times[idx])],
                                  do_sample_frames=False, return_tensors="pt", **renderer.vision_kwargs)  # fmt: skip


def timed(fn) -> float:
    cold()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def render_growth(processor, sample, config, crops) -> tuple[float, float]:
    """Seconds of the first and the last turn's render (RenderState.extend) in one episode."""
    times: list[float] = []
    original = prompting.RenderState.extend

    def extend(self, messages):
        t0 = time.process_time()
        original(self, messages)
        times.append(time.process_time() - t0)

    prompting.RenderState.extend = extend
    try:
        cold()
        episode(processor, sample, config, crops)
    finally:
        prompting.RenderState.extend = original
    return times[1], times[-1]  # times[0] is the initial prompt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", default=video_mod.DEFAULT_BACKEND, choices=video_mod.BACKENDS)
    ap.add_argument("--videos", default=str(Path(tempfile.gettempdir()) / "videoseek-bench-videos"))
    args = ap.parse_args()
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(str(ensure_tiny_model()))
    out = Path(args.videos)
    out.mkdir(parents=True, exist_ok=True)
    v720 = encoded_minute(out / "720p_60s.mp4", 1280, 720, 30)
    v1080 = repeat_video(encoded_minute(out / "1080p_1min_10fps.mp4", 1920, 1080, 10), out / "1080p_10min.mp4", 10)
    base = dict(initial_frames=16, frames_per_call=8, max_pixels=392 * 392, video_backend=args.backend)
    crops5 = [(5, 12), (20, 27), (33, 41), (44, 50), (52, 59)]
    crops9 = [(3 + 6 * k, 8 + 6 * k) for k in range(9)]
    cases = [
        ("720p 60 s, 5 crops", v720, 60.0, EnvConfig(**base, max_turns=6), crops5, 1.10),
        ("1080p 10 min, 5 crops", v1080, 600.0, EnvConfig(**base, max_turns=6), [(s * 10, e * 10) for s, e in crops5], 1.10),
        ("720p 60 s, 10 turns", v720, 60.0, EnvConfig(**base, max_turns=10, max_total_frames=88), crops9, 1.20),
    ]
    print(f"backend {args.backend}; CPU seconds (process_time), median of {args.repeats}, floor and episode alternated")
    for name, path, duration, config, crops, target in cases:
        sample = VideoSample(id="bench", video=str(path), question="What happens?", options=["A. x", "B. y"], answer="A",
                             problem_type="multiple choice", duration=duration, clue_intervals=[crops[0]])  # fmt: skip
        result = episode(processor, sample, config, crops)  # warm-up: imports, tokenizer, file cache
        ep, fl = [], []
        for r in range(args.repeats):
            pair = [("e", lambda: episode(processor, sample, config, crops)), ("f", lambda: floor(processor, sample, config, result))]
            for kind, fn in pair if r % 2 == 0 else pair[::-1]:
                (ep if kind == "e" else fl).append(timed(fn))
        e, f = statistics.median(ep), statistics.median(fl)
        first, last = render_growth(processor, sample, config, crops)
        frames = sum(len(v[0]) for v in result.videos)
        print(f"[{name}] {frames} frames: floor {f * 1000:.0f} ms, episode {e * 1000:.0f} ms -> {e / f:.2f}x "
              f"(target <= {target:.2f}x) {'OK' if e / f <= target else 'MISSED'}; render turn {len(crops)} / turn 1: "
              f"{last * 1000:.1f} / {first * 1000:.1f} ms = {last / max(first, 1e-9):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
