"""`videoseek export-verl --data samples.jsonl --out DIR`: parquet rows for verl's RL dataset.

One row per sample, in the layout `verl.utils.dataset.rl_dataset.RLHFDataset` reads:

- `prompt`: the chat messages of the episode's start as the renderer writes them (the env's system
  prompt for its tools, then the user turn with a `<video>` placeholder and the question text the
  env shows at reset);
- `videos`: one entry per placeholder, the env's sparse initial frames written as JPEG files
  (`{"video": [frame paths], "sample_fps": n / duration, "min_pixels", "max_pixels"}`), which
  qwen-vl-utils loads as a video, so verl's length filter and verl's stock single-turn loop (a
  no-tool baseline) see the frames the env shows;
- `reward_model.ground_truth`: the answer; `data_source`; `agent_name`: "videoseek"
  (`VideoSeekAgentLoop`, the default) or "tool_agent" (`--agent tool_agent`: verl's stock
  `ToolAgentLoop` with the `VideoSeekTool` adapters, `training/configs/tools/*.yaml`);
- `extra_info`: `index`, `sample_id`, `split`, and `sample` (the `VideoSample` as a JSON string with
  an absolute video path and its duration filled in), which `VideoSeekAgentLoop` and
  `compute_score` read; `tools`: the names of the env's tools (`--tools`, default
  `EnvConfig`'s), whose per-tool call counts `compute_score` reports; and for each of them the
  same sample string in `tools_kwargs.<tool>.create_kwargs.sample`, which verl's `ToolAgentLoop`
  hands to that tool's adapter (`VideoSeekTool.create`) at every call.

The agent loop itself does not use the frame files: it rebuilds the conversation from
`extra_info.sample` through `VideoSeekEnv` and the renderer, so its tokens match a local rollout.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from videoseek.agents.policy import Message
from videoseek.agents.prompting import defang, initial_messages, placeholder_text
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import DataError, VideoSample, iter_jsonl
from videoseek.envs.tools import DEFAULT_TOOLS, resolve_tools
from videoseek.rewards import RewardConfig
from videoseek.training.verl_plugin.records import AGENT_NAME, TOOL_AGENT_NAME, TOOLS_KEY, sample_to_json

FRAME_QUALITY = 95
# Qwen2.5-VL's patch (14) x spatial merge (2): qwen-vl-utils resizes frames to multiples of it.
IMAGE_FACTOR = 28


def frame_folder_name(sample_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in sample_id)


def write_frames(frames: np.ndarray, folder: Path) -> list[str]:
    """Save frames as JPEG files `000.jpg`, ...; returns their absolute paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, frame in enumerate(frames):
        path = folder / f"{k:03d}.jpg"
        Image.fromarray(np.ascontiguousarray(frame)).save(path, quality=FRAME_QUALITY)
        paths.append(str(path.resolve()))
    return paths


def video_entry(paths: list[str], timestamps: np.ndarray, duration: float, max_pixels: int | None) -> dict[str, Any]:
    """The `videos` entry for the sparse frames (qwen-vl-utils' list-of-frames form)."""
    fps = len(paths) / duration if duration > 0 else 1.0
    entry: dict[str, Any] = {"video": paths, "sample_fps": float(fps)}
    if max_pixels:
        entry["max_pixels"] = int(max_pixels)
        entry["min_pixels"] = int(min(max_pixels, 4 * IMAGE_FACTOR * IMAGE_FACTOR))
    return entry


def placeholder_prompt(messages: list[Message], video_token: str = "<video>") -> list[dict[str, str]]:
    """Messages as verl's text prompt: frames become `video_token` where the renderer puts the video.

    The layout is the renderer's own (`prompting.lay_out`).
    """
    out = []
    for m in messages:
        # verl's media markers and Qwen's special-token spellings stay text: `<video>` in a question
        # would ask verl's dataset for a second video (AssertionError). The agent loop renders from
        # the sample itself, so this only changes verl's `raw_prompt`.
        text = defang(m.text)
        content = placeholder_text(m.role, text, m.timestamps, video_token) if m.num_frames else text
        out.append({"role": m.role, "content": content})
    return out


def export_row(sample: VideoSample, index: int, split: str, env_config: EnvConfig, frames_root: Path, agent_name: str = AGENT_NAME) -> dict[str, Any]:
    """One parquet row for `sample` (decodes its initial frames through the env)."""
    env = VideoSeekEnv(sample, env_config)
    obs, info = env.reset(seed=0)
    sample = sample.model_copy(update={"duration": env.duration, "video": str(Path(sample.video).resolve())})
    frames, ts = obs["frames"], obs["timestamps"]
    prompt = placeholder_prompt(initial_messages(obs, info["instructions"]))
    videos = []
    if len(ts):
        paths = write_frames(frames, frames_root / frame_folder_name(sample.id))
        videos.append(video_entry(paths, ts, env.duration, env_config.max_pixels))
    sample_json = sample_to_json(sample)
    tools = list(env.tools)  # the configured tools' names, in order
    extra_info: dict[str, Any] = {"index": index, "split": split, "sample_id": sample.id, "sample": sample_json, TOOLS_KEY: tools,
                                  "reward_preset": env_config.reward.preset}  # compute_score's preset on verl's ToolAgentLoop
    if tools:  # (parquet cannot store an empty struct: a no-tool row has no tools_kwargs)
        extra_info["tools_kwargs"] = {name: {"create_kwargs": {"sample": sample_json}} for name in tools}
    return {
        "data_source": sample.data_source or "videoseek",
        "agent_name": agent_name,
        "prompt": prompt,
        "videos": videos,
        "ability": "video_reasoning",
        "reward_model": {"style": "rule", "ground_truth": sample.answer},
        "extra_info": extra_info,
    }


def export_samples(
    samples: list[VideoSample], out_dir: str | Path, split: str = "train", env_config: EnvConfig | None = None, progress: bool = True,
    agent_name: str = AGENT_NAME,
) -> Path:
    """Write `OUT/{split}.parquet` (and its frames under `OUT/frames/{split}/`); returns the parquet path."""
    import pandas as pd

    if not samples:
        raise DataError(f"no samples to export for split {split!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = env_config or EnvConfig()
    rows = []
    iterator = samples
    if progress:
        from tqdm import tqdm

        iterator = tqdm(samples, desc=f"export {split}", unit="sample")
    for k, sample in enumerate(iterator):
        rows.append(export_row(sample, k, split, config, out / "frames" / split, agent_name))
    path = out / f"{split}.parquet"
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def split_samples(samples: list[VideoSample], val_fraction: float, seed: int = 0) -> tuple[list[VideoSample], list[VideoSample]]:
    """A seeded split; at least one validation sample when `val_fraction` > 0 and there are >= 2 samples."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"--val-fraction must be in [0, 1), got {val_fraction}")
    order = np.random.default_rng(seed).permutation(len(samples))
    n_val = min(len(samples) - 1, max(1, math.floor(len(samples) * val_fraction))) if val_fraction > 0 and len(samples) > 1 else 0
    val = [samples[i] for i in sorted(order[:n_val])]
    train = [samples[i] for i in sorted(order[n_val:])]
    return train, val


# ---- CLI -------------------------------------------------------------------------------------
def parse_tools(text: str) -> list[str]:
    """The tool specs of a comma-separated `--tools` value ("" is none); ValueError (one line) naming an unknown tool."""
    tools = [t.strip() for t in (text or "").split(",") if t.strip()]
    resolve_tools(tools)  # "unknown tool 'x'; registered tools: ..."
    return tools


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, nargs="+", help="samples JSONL file(s)")
    parser.add_argument("--out", required=True, help="output folder (train.parquet, val.parquet, frames/)")
    parser.add_argument("--val-fraction", type=float, default=0.1, help="share of samples for val.parquet (default 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/val split")
    parser.add_argument("--initial-frames", type=int, default=EnvConfig().initial_frames, help="sparse frames at reset")
    parser.add_argument("--max-pixels", type=int, default=EnvConfig().max_pixels, help="per-frame pixel budget")
    parser.add_argument("--tools", default=",".join(DEFAULT_TOOLS), metavar="NAMES",
                        help="the env's tools, comma-separated: registered names or import paths 'package.module:Class' or "
                        "'path/to/file.py:Class' (default: %(default)s; '' for none); the rows get the system prompt of "
                        "these tools and tools_kwargs for each")
    parser.add_argument("--reward", default=RewardConfig().preset, metavar="PRESET",
                        help="the reward preset the rows are scored with on verl's ToolAgentLoop (extra_info.reward_preset; "
                        "VideoSeekAgentLoop's own config wins) and OUT/run.json records")
    parser.add_argument("--agent", choices=[AGENT_NAME, TOOL_AGENT_NAME], default=AGENT_NAME,
                        help="the rows' agent_name: videoseek (VideoSeekAgentLoop, tool frames as video) or tool_agent "
                        "(verl's stock ToolAgentLoop with the VideoSeekTool adapters, tool frames as images; training/configs/tools/)")


def run(args: argparse.Namespace) -> int:
    from videoseek.agents.run_record import run_record, write_run_record
    from videoseek.envs.errors import UserError

    try:
        tools = parse_tools(args.tools)
    except ValueError as exc:
        raise UserError(f"--tools: {exc}") from None
    try:
        reward = RewardConfig(preset=args.reward)
    except ValueError as exc:
        raise UserError(f"--reward: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}") from None
    config = EnvConfig(initial_frames=args.initial_frames, max_pixels=args.max_pixels, tools=tools, reward=reward)
    samples: list[VideoSample] = []
    for path in args.data:
        samples.extend(iter_jsonl(path))
    train, val = split_samples(samples, args.val_fraction, args.seed)
    written = [export_samples(train, args.out, "train", config, agent_name=args.agent)]
    if val:
        written.append(export_samples(val, args.out, "val", config, agent_name=args.agent))
    # The run record of a verl run trained from these rows (its dumps in OUT/rollouts, as
    # run_csgrpo.py sets `trainer.rollout_data_dir`, sit one folder below it for the viewer).
    write_run_record(args.out, run_record("export-verl", {"agent": args.agent, "val_fraction": args.val_fraction, "parquet": [str(p) for p in written]},
                                          data=args.data, env=config, seed=args.seed))  # fmt: skip
    for path in written:
        print(path)
    return 0
