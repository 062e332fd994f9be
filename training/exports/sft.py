"""`videoseek export-sft --runs RUN [RUN ...] --out DIR`: multi-turn SFT conversations for verl's SFT trainer.

The cold-start stage of Open-o3-Video-v2 (seed 003: "SFT on multi-turn trajectories with tool
calls and returned frames, then RL") trains on whole episodes: the question with the sparse
frames, each assistant turn (thinking + a tool call), the frames the call returned, and the
final answer. This command turns trajectory files (`RUN/trajectories.jsonl`, from the oracle
policy or any other) into parquet rows that `verl.utils.dataset.multiturn_sft_dataset.
MultiTurnSFTDataset` reads:

- `messages`: system, user, then alternating assistant / tool-response turns; frames appear as
  `<video>` placeholders; verl puts the loss on assistant messages only (their tokens after the
  `<|im_start|>assistant\\n` header).
- `videos`: one entry per placeholder, in order: `{"video": [JPEG paths of the run's frames],
  "sample_fps": frames per second of those frames}` (qwen-vl-utils' list-of-frames video).

The conversation is written so any Qwen ChatML template renders it exactly as the RL renderer
(`VIDEOSEEK_CHAT_TEMPLATE`) does: the system prompt and the tools block of the episode's tools are
baked into the system message, and a tool response is a user turn wrapped in `<tool_response>` ...
`</tool_response>`, which is how Qwen2.5 / Qwen3 templates render tool messages. Qwen2.5-VL's own
template has no tool support, so this keeps SFT tokens equal to the rollout's tokens with either
template. Calls and results are written as the episode has them, whatever the tool: the
assistant's text with its call, and the env's reply with the frames the tool returned as one video
(a zoom's single frame too, as the renderer lays it out).

The episode's tools are those `RUN/run.json` records for the run's env (`videoseek rollout`, the
local GRPO backend); a run without that record (a verl episode dump, bare `run_rollouts` output)
takes `--tools`, else the default tools. An episode that called a tool the list lacks is an error:
its conversation would teach a tool the system message never offers.

A third column, `video_times`, holds each video's exact frame times (seconds in the source
video; verl's dataset ignores it): `training/run_sft.py`'s local backend reads the rows back into
the RL renderer's messages with `sft_messages`, frames at their real times, so local SFT trains on
the very tokens a rollout of the same episode has.

Which episodes: origin episodes that ended with an answer and no failure; `--only-correct`
(default) keeps those whose answer is correct.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE, placeholder_text, split_placeholder_text
from videoseek.envs.sample import DataError
from videoseek.envs.tools import DEFAULT_TOOLS, resolve_tools, system_prompt, tool_schemas
from videoseek.envs.trajectory import FrameRef, Trajectory

VIDEO = "<video>"


def system_text(tools: Sequence[str] = DEFAULT_TOOLS) -> str:
    """The system message's text as VIDEOSEEK_CHAT_TEMPLATE renders it for an env with these tools
    (names or import paths): the env's system prompt (`info["instructions"]`) and the tools block of
    their schemas (`info["tools"]`; none without tools)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[[{"role": "system", "content": system_prompt(list(tools))}]],
        tools=tool_schemas(list(tools)) or None,
        chat_template=VIDEOSEEK_CHAT_TEMPLATE,
    )
    text = rendered[0]
    head, tail = "<|im_start|>system\n", "<|im_end|>\n"
    if not (text.startswith(head) and text.endswith(tail)):
        raise ValueError("VIDEOSEEK_CHAT_TEMPLATE no longer renders a system message as ChatML")
    return text[len(head) : -len(tail)]


def frame_rate(times: list[float]) -> float:
    """Frames per second of frames at `times` (their mean rate; 1 for one frame), as `frames_metadata`."""
    if len(times) < 2 or times[-1] <= times[0]:
        return 1.0
    return (len(times) - 1) / (times[-1] - times[0])


def video_entry(frames: list[FrameRef], run_dir: Path, where: str) -> dict[str, Any]:
    paths = []
    for k, f in enumerate(frames):
        if f.path is None:
            raise DataError(f"{where}: frame {k} at {f.t}s has no file (write trajectories with an output directory)")
        path = (run_dir / f.path).resolve()
        if not path.is_file():
            raise DataError(f"{where}: frame file {path} is missing")
        paths.append(str(path))
    return {"video": paths, "sample_fps": float(frame_rate([f.t for f in frames]))}


def conversation(traj: Trajectory, run_dir: Path, system: str) -> tuple[list[dict[str, str]], list[dict[str, Any]], list[list[float]]]:
    """(messages, videos, video_times) of one trajectory."""
    where = f"{run_dir}/trajectories.jsonl episode {traj.episode_id}"
    videos: list[dict[str, Any]] = []
    times: list[list[float]] = []
    user = traj.initial.text
    if traj.initial.frames:
        user = placeholder_text("user", user, [f.t for f in traj.initial.frames], VIDEO)
        videos.append(video_entry(traj.initial.frames, run_dir, where))
        times.append([float(f.t) for f in traj.initial.frames])
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for k, turn in enumerate(traj.turns):
        messages.append({"role": "assistant", "content": turn.assistant})
        if k == len(traj.turns) - 1:
            break  # the env's reply to the final answer is not part of the conversation
        body = turn.observation.text
        if turn.observation.frames:
            body = placeholder_text("tool", body, [f.t for f in turn.observation.frames], VIDEO)
            videos.append(video_entry(turn.observation.frames, run_dir, where))
            times.append([float(f.t) for f in turn.observation.frames])
        messages.append({"role": "user", "content": TOOL_OPEN + body + TOOL_CLOSE})
    return messages, videos, times


TOOL_OPEN, TOOL_CLOSE = "<tool_response>\n", "\n</tool_response>"


def _split_frames(role: str, content: str, where: str) -> str:
    """The text of a message with one video (`prompting.split_placeholder_text`), DataError naming it otherwise."""
    try:
        return split_placeholder_text(role, content, VIDEO)
    except ValueError as exc:
        raise DataError(f"{where}: {exc}") from None


def sft_messages(row: dict[str, Any], where: str = "row") -> list[Any]:
    """The renderer `Message`s of one exported row (the inverse of `conversation`), frames loaded.

    The system message keeps its baked-in tool block: render these with a renderer built with
    `tools=()` and the ids equal those of the live episode rendered with its env's tools.
    """
    from PIL import Image
    from videoseek.agents.policy import Message

    videos, times = list(row.get("videos", [])), list(row.get("video_times", []))
    if len(times) != len(videos):
        raise DataError(f"{where}: field 'video_times' has {len(times)} entries for {len(videos)} videos (re-export with this version)")
    out: list[Message] = []
    k = 0
    for i, m in enumerate(row["messages"]):
        role, content = str(m["role"]), str(m["content"])
        if VIDEO not in content:
            tool = role == "user" and content.startswith(TOOL_OPEN) and content.endswith(TOOL_CLOSE)
            out.append(Message("tool", content[len(TOOL_OPEN) : -len(TOOL_CLOSE)]) if tool else Message(role, content))
            continue
        if k >= len(videos):
            raise DataError(f"{where}: message {i} has a <video> beyond the {len(videos)} entries of 'videos'")
        paths, ts = list(videos[k]["video"]), np.asarray(times[k], dtype=np.float64)
        if len(paths) != len(ts):
            raise DataError(f"{where}: video {k} has {len(paths)} frames and {len(ts)} times")
        frames = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in paths])
        k += 1
        if content.startswith(TOOL_OPEN) and content.endswith(TOOL_CLOSE):
            out.append(Message("tool", _split_frames("tool", content[len(TOOL_OPEN) : -len(TOOL_CLOSE)], f"{where} message {i}"), frames, ts))
        else:
            out.append(Message(role, _split_frames("user", content, f"{where} message {i}"), frames, ts))
    return out


def keep(traj: Trajectory, only_correct: bool) -> bool:
    """Origin episodes that answered without failure (and, if asked, correctly)."""
    if traj.group.role != "origin" or traj.failure or not traj.terminated or not traj.turns:
        return False
    return bool(traj.correct) if only_correct else True


def run_tool_names(run_dir: Path, tools: Sequence[str] | None = None) -> list[str]:
    """The tools of a run's episodes: `RUN/run.json`'s (`run_record.recorded_tools`), else `tools`,
    else the default tools; DataError when one cannot be imported."""
    from videoseek.agents.run_record import recorded_tools

    specs = recorded_tools(run_dir)
    specs = specs if specs is not None else list(tools) if tools is not None else list(DEFAULT_TOOLS)
    try:
        resolve_tools(specs)
    except ValueError as exc:
        raise DataError(f"{run_dir}: the run's tools: {exc}") from None
    return specs


def check_tools(traj: Trajectory, names: Sequence[str], where: str) -> None:
    """DataError when the episode called (successfully) a tool that is not among `names`."""
    extra = sorted({c.tool for c in traj.calls} - set(names))
    if extra:
        raise DataError(f"{where}: episode {traj.episode_id} calls {', '.join(extra)}, which the run's tools "
                        f"({', '.join(names) or 'none'}) do not list; give the run's tools with --tools")  # fmt: skip


def export_sft(runs: list[str | Path], out_dir: str | Path, only_correct: bool = True, val_fraction: float = 0.0, seed: int = 0,
               tools: Sequence[str] | None = None) -> list[Path]:
    """Write `OUT/train.parquet` (and `OUT/val.parquet` when `val_fraction` > 0); returns the paths.

    `tools`: the env's tools (names or import paths) for runs whose `run.json` does not record
    them (default: the default tools); a run's own record wins."""
    import pandas as pd
    from videoseek.envs.trajectory import read_trajectories

    rows = []
    for run in runs:
        run_dir = Path(run)
        if not (run_dir / "trajectories.jsonl").is_file():
            raise DataError(f"{run_dir}: no trajectories.jsonl (run `videoseek rollout --out {run_dir}` first)")
        specs = run_tool_names(run_dir, tools)
        names = [cls.name for cls in resolve_tools(specs)]
        system = system_text(specs)
        for traj in read_trajectories(run_dir):
            if keep(traj, only_correct):
                check_tools(traj, names, str(run_dir))
                messages, videos, times = conversation(traj, run_dir, system)
                rows.append({
                    "messages": messages, "videos": videos, "video_times": times, "episode_id": traj.episode_id,
                    "sample_id": traj.sample_id, "data_source": traj.data_source or "videoseek", "policy": traj.policy,
                })  # fmt: skip
    if not rows:
        raise DataError(f"no episode to export from {', '.join(map(str, runs))} (only_correct={only_correct})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng(seed).permutation(len(rows))
    n_val = min(len(rows) - 1, max(1, math.floor(len(rows) * val_fraction))) if val_fraction > 0 and len(rows) > 1 else 0
    splits = {"train": [rows[i] for i in sorted(order[n_val:])]}
    if n_val:
        splits["val"] = [rows[i] for i in sorted(order[:n_val])]
    paths = []
    for name, part in splits.items():
        path = out / f"{name}.parquet"
        pd.DataFrame(part).to_parquet(path, index=False)
        paths.append(path)
    return paths


# ---- CLI -------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", required=True, nargs="+", help="run directories holding trajectories.jsonl and frames/")
    parser.add_argument("--out", required=True, help="output folder (train.parquet, val.parquet)")
    parser.add_argument("--all", action="store_true", help="keep answered episodes whether correct or not (default: correct only)")
    parser.add_argument("--val-fraction", type=float, default=0.0, help="share of episodes for val.parquet (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/val split")
    parser.add_argument("--tools", default=None, metavar="TOOL,TOOL,...",
                        help="the env's tools (comma-separated names or import paths) of runs whose run.json does not record them "
                        "(a verl episode dump, bare run_rollouts output); default: the default tools")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.val_fraction < 1:
        from videoseek.envs.errors import UserError

        raise UserError(f"--val-fraction must be in [0, 1), got {args.val_fraction}")
    tools = None if args.tools is None else [t.strip() for t in args.tools.split(",") if t.strip()]
    for path in export_sft(args.runs, args.out, only_correct=not args.all, val_fraction=args.val_fraction, seed=args.seed, tools=tools):
        print(path)
    return 0
