"""GRPO with TRL's `GRPOTrainer` on VideoSeek episodes (the optional `trl` extra).

    python examples/trl_grpo.py                                   # offline CPU smoke run: synthetic set, tiny random Qwen2.5-VL
    python examples/trl_grpo.py --data samples.jsonl --model Qwen/Qwen2.5-VL-3B-Instruct --steps 200 --bf16

TRL renders each prompt with the model's processor, generates, parses `<tool_call>`s with its
response parser, runs the `VideoSeekTRLEnv` method of the called tool (one per `--tools` entry;
frames come back as images), and scores the answer with the env's reward preset (`--reward`;
per-episode presets only: csgrpo, default, prr).
The processor gets the project's chat template (`VIDEOSEEK_CHAT_TEMPLATE`), which renders
assistant `tool_calls` and tool turns with images (Qwen2.5-VL's own renders no `tool_calls`).
docs/training.md, "Three ways to train", says what this path gives and what it loses against
VideoSeekAgentLoop.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="samples JSONL (default: synthesize 8 videos into OUT/data)")
    parser.add_argument("--model", help="checkpoint path or hub name (default: the tiny random Qwen2.5-VL, built offline)")
    parser.add_argument("--out", default="runs/trl_grpo", help="output folder")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--reward", default="csgrpo", help="per-episode reward preset")
    parser.add_argument("--num-generations", type=int, default=2)
    parser.add_argument("--max-completion-length", type=int, default=512, help="tokens per rollout, tool turns and their images included")
    parser.add_argument("--tools", default=None,
                        help="the env's tools, comma-separated: crop_video, zoom, or an import path such as "
                        "examples/custom_tool.py:FrameAtTool (default: EnvConfig's)")
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    from transformers import AutoModelForImageTextToText, AutoProcessor
    from trl import GRPOConfig, GRPOTrainer

    from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE
    from videoseek.agents.tiny_model import ensure_tiny_model
    from videoseek.envs import EnvConfig
    from videoseek.envs.synth import generate_dataset
    from videoseek.integrations.trl import TrajectoryRecorder, add_response_schema, environment_factory, reward_funcs, samples_dataset

    out = Path(args.out)
    data = args.data
    if data is None:
        generate_dataset(out / "data", n=8, seed=0, max_duration=30)
        data = out / "data" / "samples.jsonl"
    model_path = args.model or str(ensure_tiny_model())
    processor = AutoProcessor.from_pretrained(model_path)
    processor.chat_template = VIDEOSEEK_CHAT_TEMPLATE
    model = AutoModelForImageTextToText.from_pretrained(model_path)
    config = EnvConfig(reward=args.reward, tools=args.tools, initial_frames=4, frames_per_call=4, max_pixels=112 * 112)
    recorder = TrajectoryRecorder(out, config, data=data, model=model_path)  # run.json and each step's episodes: `videoseek view OUT`
    trainer = GRPOTrainer(
        model=model,
        processing_class=add_response_schema(processor),
        args=GRPOConfig(
            output_dir=str(out), max_steps=args.steps, per_device_train_batch_size=args.num_generations,
            num_generations=args.num_generations, max_completion_length=args.max_completion_length,
            learning_rate=1e-6, beta=0.0, logging_steps=1, save_strategy="no", report_to=[], bf16=args.bf16,
            use_cpu=not args.bf16,
        ),  # fmt: skip
        train_dataset=samples_dataset(data, config),  # the system prompt of the config's tools
        environment_factory=environment_factory(config, recorder=recorder),
        reward_funcs=reward_funcs,
        callbacks=[recorder],
    )
    trainer.train()
    print(f"done: {trainer.state.global_step} steps, {recorder.written} episodes; replay them with `videoseek view {out}`")


if __name__ == "__main__":
    main()
