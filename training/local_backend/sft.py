"""Multi-turn SFT in one process (`training/run_sft.py --backend local`): the cold start before GRPO.

Each row of an `videoseek export-sft` parquet is one whole episode (question and sparse frames,
assistant turns, the frames each crop returned, the answer). `load_sft_episodes` reads the rows
back into the RL renderer's messages (`exports.sft.sft_messages`) and tokenises them with the
policy's own `ConversationRenderer`, so SFT trains on exactly the token layout rollouts produce
(frames at their real times, Qwen2.5-VL's `second_per_grid_ts`, Qwen3-VL's `<t seconds>`).
The loss is next-token cross-entropy on the assistant tokens only, each turn's closing
`<|im_end|>` included (the model learns to end its turns); system, question, tool responses and
frames are context. Tokens are averaged over the whole batch (verl's SFT trainer's token-mean).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from videoseek.envs.sample import DataError
from videoseek.training.local_backend.grpo import TokenizedEpisode, masked_token_logprobs
from videoseek.training.local_backend.rollout import tokenize_episode


@dataclass
class SFTStats:
    loss: float
    tokens: int
    grad_norm: float


def read_rows(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The rows of export-sft parquet files, each with a `where` for error messages."""
    import pandas as pd

    rows = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: no such SFT parquet (write one with `videoseek export-sft`)")
        frame = pd.read_parquet(path)
        for field in ("messages", "videos"):
            if field not in frame.columns:
                raise DataError(f"{path}: column {field!r} is missing (not an export-sft file)")
        for i, row in enumerate(frame.to_dict("records")):
            row["where"] = f"{path} row {i}"
            rows.append(row)
    if not rows:
        raise DataError(f"{', '.join(map(str, paths))}: no rows")
    return rows


def sft_renderer(processor: Any) -> Any:
    """The renderer for exported rows: their system message already holds the tool block."""
    from videoseek.agents.prompting import ConversationRenderer

    return ConversationRenderer(processor, tools=())


def load_sft_episodes(paths: Sequence[str | Path], processor: Any, max_length: int | None = None) -> list[TokenizedEpisode]:
    """Tokenised episodes of export-sft parquet files, loss on every assistant token."""
    from videoseek.training.exports.sft import sft_messages

    renderer = sft_renderer(processor)
    episodes = []
    for row in read_rows(paths):
        episode = tokenize_episode(renderer, sft_messages(row, row["where"]), train_turn_end=True)
        if max_length is not None and episode.input_ids.numel() > max_length:
            raise DataError(f"{row['where']}: {episode.input_ids.numel()} tokens exceed --max-length {max_length}")
        if not int(episode.loss_mask.sum()):
            raise DataError(f"{row['where']}: no assistant tokens to train on")
        episodes.append(episode)
    return episodes


def sft_loss(model: torch.nn.Module, episodes: Sequence[TokenizedEpisode], device: torch.device | str) -> tuple[torch.Tensor, int]:
    """(token-mean negative log-likelihood of the assistant tokens, their count) over `episodes`."""
    total = torch.zeros((), device=device)
    count = 0
    for episode in episodes:
        logprobs = masked_token_logprobs(model, episode, device)
        total = total - logprobs.sum()
        count += int(logprobs.numel())
    return total / max(count, 1), count


def sft_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, episodes: Sequence[TokenizedEpisode], device: torch.device | str,
             grad_clip: float = 1.0) -> SFTStats:
    """One optimizer step on `episodes` (one batch)."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss, tokens = sft_loss(model, episodes, device)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], grad_clip)
    optimizer.step()
    return SFTStats(loss=float(loss.detach()), tokens=tokens, grad_norm=float(grad_norm))


def freeze_vision_encoder(model: torch.nn.Module) -> int:
    """Freeze the vision tower except its mergers (Qwen-VL's own SFT recipe: `tune_mm_vision=False`,
    `tune_mm_mlp=True`); returns the number of frozen parameters.

    A randomly initialised tower trained from scratch on a few hundred episodes collapses to one
    large constant vector (the text model learns to ignore it); frozen, its random features keep
    the pixels' colours and layout, and the mergers learn to pass them on.
    """
    visual = model.model.visual
    frozen = 0
    for name, param in visual.named_parameters():
        if "merger" not in name:
            param.requires_grad_(False)
            frozen += param.numel()
    return frozen


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, episodes: Sequence[TokenizedEpisode], device: torch.device | str) -> float:
    """Token-mean assistant-token NLL of `episodes` (dropout off)."""
    model.eval()
    loss, _ = sft_loss(model, episodes, device)
    return float(loss)
