#!/usr/bin/env python
"""Multi-turn SFT of a video agent on tool-use traces: the cold start before GRPO.

    videoseek rollout --data train.jsonl --policy sweep-shuffled --out runs/traces   # traces
    videoseek export-sft --runs runs/traces --out runs/sft_data                       # conversations
    python training/run_sft.py --data runs/sft_data/train.parquet --out runs/sft     # CPU or one GPU
    python training/run_sft.py --backend verl --data runs/sft_data/train.parquet --dry-run

Two backends read the same export-sft parquet:

- `local` (default): SFT in this process with transformers. Each row (one whole episode) is
  tokenised with the RL renderer, the loss is cross-entropy on the assistant tokens only
  (`videoseek.training.local_backend.sft`), AdamW with linear warmup and cosine decay. Metrics go to the console
  and RUN/metrics.jsonl, what decides the run to RUN/run.json (arguments, data and weights hashes,
  version, commit); the model, tokenizer, processor and chat template to RUN/checkpoint, which
  `run_csgrpo.py --model RUN/checkpoint` and `videoseek rollout --policy hf:RUN/checkpoint` load.
- `verl`: composes verl's multi-turn SFT trainer config (`verl.trainer.sft_trainer`, the engine
  trainer with `MultiTurnSFTDataset`), validates it, writes RUN/verl_sft_config.yaml and
  RUN/command.sh, and runs `torchrun -m verl.trainer.sft_trainer` (`--dry-run` stops before). The
  dry run also builds verl's `MultiTurnSFTDataset` on the first rows, so a row verl cannot read
  fails here and not on the GPU node.

The script reads top to bottom: arguments, data, model, then either backend.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: drop training/ from the path (its modules are videoseek.training.*)
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


# ---- 1. arguments ------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("local", "verl"), default="local", help="local (default) or verl's SFT trainer")
    p.add_argument("--data", required=True, nargs="+", help="export-sft parquet file(s) (train.parquet)")
    p.add_argument("--val-data", default=None, nargs="+", help="held-out export-sft parquet (default: none; verl: --data)")
    p.add_argument("--model", default=None, help="Hugging Face checkpoint folder (default: the tiny offline Qwen2.5-VL)")
    p.add_argument("--out", default="runs/sft", help="run directory (default runs/sft)")
    p.add_argument("--epochs", type=int, default=3, help="passes over the data (default 3)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    p.add_argument("--batch-size", type=int, default=8, help="conversations per optimizer step (default 8)")
    p.add_argument("--lr", type=float, default=1e-5, help="peak learning rate (default 1e-5; a random tiny model wants ~1e-3)")
    p.add_argument("--warmup", type=float, default=0.05, help="share of steps with linear warmup (default 0.05)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay (default 0)")
    p.add_argument("--freeze-vision", action="store_true", help="train the vision mergers and the language model, not the vision encoder")
    p.add_argument("--max-length", type=int, default=8192, help="longest conversation in tokens; longer rows are an error (default 8192)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data order and the tiny model (default 0)")
    p.add_argument("--device", default=None, help="local backend: cuda or cpu (default cuda when available)")
    p.add_argument("--threads", type=int, default=None, help="local backend: torch CPU threads")
    p.add_argument("--n-gpus", type=int, default=1, help="verl backend: GPUs per node (default 1)")
    p.add_argument("--dry-run", action="store_true", help="verl backend: compose and validate, start nothing")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra verl override (repeatable)")
    return p.parse_args(argv)


def model_path(args: argparse.Namespace) -> str:
    if args.model:
        return args.model
    from videoseek.agents.tiny_model import ensure_tiny_model

    return str(ensure_tiny_model(seed=args.seed))


# ---- 2a. the verl backend ----------------------------------------------------------------------
def run_verl(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf
    from videoseek.training.verl_plugin.config import shell_line
    from videoseek.training.verl_plugin.sft import check_sft_rows, compose_sft, sft_overrides

    run_dir = Path(args.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    overrides = sft_overrides(
        model=model_path(args), train_files=args.data, val_files=args.val_data or args.data, out=str(run_dir.resolve()),
        epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, max_length=args.max_length, n_gpus=args.n_gpus,
        seed=args.seed, extra=args.override,
    )  # fmt: skip
    command = ["torchrun", "--standalone", f"--nproc_per_node={args.n_gpus}", "-m", "verl.trainer.sft_trainer", *overrides]
    print(shell_line(command, head=6), flush=True)
    cfg = compose_sft(overrides)  # an unknown key or bad value fails here
    rows = check_sft_rows(cfg)  # verl's own MultiTurnSFTDataset reads the first row with the model's processor
    (run_dir / "verl_sft_config.yaml").write_text(OmegaConf.to_yaml(cfg), encoding="utf-8")
    (run_dir / "command.sh").write_text("#!/bin/sh\n" + shell_line(command, head=6) + "\n", encoding="utf-8")
    print(f"verl SFT config valid ({rows} training rows): {run_dir / 'verl_sft_config.yaml'}", flush=True)
    return 0 if args.dry_run else subprocess.call(command, env=dict(os.environ))


# ---- 2b. the local backend ---------------------------------------------------------------------
def run_local(args: argparse.Namespace) -> int:
    # First: it pins the CPU kernels, which a tensor op in the imports below (verl's) would fix.
    from videoseek.training.local_backend.determinism import make_deterministic

    determinism = make_deterministic(args.seed, args.threads)
    import numpy as np
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor, get_cosine_schedule_with_warmup
    from videoseek.agents.rope import use_sampling_rope_index
    from videoseek.agents.run_record import run_record, write_run_record
    from videoseek.training.local_backend.sft import evaluate_loss, freeze_vision_encoder, load_sft_episodes, sft_step

    run_dir = Path(args.out)
    run_dir.mkdir(parents=True, exist_ok=True)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(args.seed)

    # Data: every row tokenised once, with the processor the checkpoint ships.
    model_dir = model_path(args)
    processor = AutoProcessor.from_pretrained(model_dir, local_files_only=True)
    train = load_sft_episodes(args.data, processor, args.max_length)
    val = load_sft_episodes(args.val_data, processor, args.max_length) if args.val_data else []

    # Model: the positions rule rollouts and training use (agents.rope), float32 on CPU.
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=dtype, local_files_only=True).to(device)
    use_sampling_rope_index(model)
    if args.freeze_vision:
        print(f"vision encoder frozen: {freeze_vision_encoder(model)} parameters", flush=True)
    steps_per_epoch = math.ceil(len(train) / args.batch_size)
    total = min(args.max_steps or 10**9, steps_per_epoch * args.epochs)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=args.weight_decay)
    schedule = get_cosine_schedule_with_warmup(optimizer, max(1, round(args.warmup * total)), total)
    tokens = sum(int(e.loss_mask.sum()) for e in train)
    record = run_record("sft", {"backend": "local", "args": vars(args), "device": device, "determinism": determinism},
                        data=[*args.data, *(args.val_data or [])], seed=args.seed, model=model_dir)  # fmt: skip
    write_run_record(run_dir, record)
    print(f"local SFT: {len(train)} conversations ({tokens} assistant tokens), {total} steps of {args.batch_size}, "
          f"lr {args.lr}, {model_dir} on {device}", flush=True)  # fmt: skip

    metrics = (run_dir / "metrics.jsonl").open("w", encoding="utf-8")
    step, started = 0, time.perf_counter()
    while step < total:
        order = rng.permutation(len(train))
        for first in range(0, len(order), args.batch_size):
            if step >= total:
                break
            step += 1
            stats = sft_step(model, optimizer, [train[i] for i in order[first : first + args.batch_size]], device)
            schedule.step()
            row = {"step": step, "epoch": (step - 1) // steps_per_epoch + 1, "loss": stats.loss, "grad_norm": stats.grad_norm,
                   "tokens": stats.tokens, "lr": schedule.get_last_lr()[0], "time_s": time.perf_counter() - started}  # fmt: skip
            if val and (step % steps_per_epoch == 0 or step == total):
                row["val_loss"] = evaluate_loss(model, val, device)
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
            if step == 1 or step % 10 == 0 or step == total or "val_loss" in row:
                shown = " ".join(f"{k}={row[k]:.4g}" for k in ("loss", "val_loss", "grad_norm", "lr") if k in row)
                print(f"step {step:4d}/{total} epoch {row['epoch']} {shown} ({row['time_s']:.0f}s)", flush=True)
    metrics.close()

    checkpoint = run_dir / "checkpoint"
    model.save_pretrained(checkpoint)
    processor.save_pretrained(checkpoint)  # tokenizer, image/video processors and the chat template
    print(f"checkpoint: {checkpoint}\nmetrics: {run_dir / 'metrics.jsonl'}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    from videoseek.envs.sample import DataError
    from videoseek.training.verl_plugin.config import ConfigError

    args = parse_args(argv)
    try:
        return run_verl(args) if args.backend == "verl" or args.dry_run else run_local(args)
    except (ConfigError, DataError, FileNotFoundError) as exc:
        print(f"run_sft: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
