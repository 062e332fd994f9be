"""verl's multi-turn SFT trainer for VideoSeek conversations (`run_sft.py --backend verl`).

verl 0.9.1's engine SFT trainer (`python -m verl.trainer.sft_trainer`, config
`sft_trainer_engine.yaml`) reads parquet rows with `MultiTurnSFTDataset`: a `messages` list whose
`<video>` placeholders take the row's `videos` entries in order, each message rendered with the
model's chat template, the loss on assistant messages after their role header. `videoseek
export-sft` writes exactly that (see `videoseek.training.exports.sft`). This module composes the
trainer's config with hydra from verl's own YAML and checks it before a GPU is involved: the
override keys exist, the files exist, there is at least one full batch, and - with a local model
folder - verl's own `MultiTurnSFTDataset` tokenises the first row with the model's processor.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from videoseek.training.verl_plugin.config import ConfigError, compose, format_value

SFT_CONFIG = "sft_trainer_engine"


def sft_overrides(
    *,
    model: str,
    train_files: Sequence[str],
    val_files: Sequence[str] | None,
    out: str,
    epochs: int,
    batch_size: int,
    lr: float,
    max_length: int,
    n_gpus: int = 1,
    seed: int = 0,
    extra: Sequence[str] = (),
) -> list[str]:
    """Hydra overrides of verl's SFT trainer for export-sft parquet files."""
    values: dict[str, Any] = {
        "model.path": model,
        "data.train_files": [str(Path(f).resolve()) for f in train_files],
        "data.val_files": [str(Path(f).resolve()) for f in val_files] if val_files else None,
        "data.messages_key": "messages",
        "data.train_batch_size": batch_size,
        "data.micro_batch_size_per_gpu": 1,  # rows carry different numbers of frames
        "data.max_length": max_length,
        "data.truncation": "error",  # a cut episode would train on a conversation that never happened
        "data.num_workers": 2,
        "optim.lr": lr,
        "trainer.total_epochs": epochs,
        "trainer.default_local_dir": str(Path(out) / "verl_checkpoints"),
        "trainer.project_name": "videoseek",
        "trainer.experiment_name": "sft",
        "trainer.logger": ["console"],
        "trainer.n_gpus_per_node": n_gpus,
        "trainer.seed": seed,
        # the Hugging Face folder too, so `run_csgrpo.py --model` and `hf:PATH` can load the result
        "checkpoint.save_contents": ["model", "optimizer", "extra", "hf_model"],
    }
    overrides = [f"{k}={format_value(v)}" for k, v in values.items()]
    for item in extra:
        if "=" not in item:
            raise ConfigError(f"--override {item!r}: expected KEY=VALUE")
        overrides.append(item)
    return overrides


def compose_sft(overrides: Sequence[str]):
    """verl's SFT trainer config with `overrides`; ConfigError (one line) for an unknown key or bad value."""
    return compose(list(overrides), config_name=SFT_CONFIG)


def check_sft_rows(cfg) -> int:
    """Check the data as verl's SFT trainer will read it; returns the number of training rows.

    The files must exist and hold at least `data.train_batch_size` rows; with a local model
    folder, verl's `MultiTurnSFTDataset` must tokenise the first row (placeholders matched with
    videos, the chat template applied per message, assistant tokens in the loss).
    """
    import pyarrow.parquet as pq
    from omegaconf import OmegaConf

    files = {key: OmegaConf.to_container(cfg.data[key]) or [] for key in ("train_files", "val_files") if cfg.data.get(key)}
    for key, paths in files.items():
        for path in paths:
            if not Path(path).is_file():
                raise ConfigError(f"data.{key}: {path} does not exist (write it with `videoseek export-sft`)")
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in files["train_files"])
    if rows < cfg.data.train_batch_size:
        raise ConfigError(f"data.train_files: {rows} rows, fewer than data.train_batch_size={cfg.data.train_batch_size} (use --batch-size {rows} or more rows)")
    if Path(str(cfg.model.path)).is_dir():
        from verl.utils import hf_processor, hf_tokenizer
        from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

        model = str(cfg.model.path)
        try:
            dataset = MultiTurnSFTDataset(files["train_files"], hf_tokenizer(model), cfg.data, hf_processor(model), max_samples=1)
            item = dataset[0]
        except Exception as exc:  # noqa: BLE001 - report whatever verl's dataset says, in one line
            raise ConfigError(f"data.train_files: verl's MultiTurnSFTDataset cannot read the first row: {str(exc).strip().splitlines()[0]}") from None
        if not int(item["loss_mask"].sum()):
            raise ConfigError("data.train_files: verl's MultiTurnSFTDataset finds no assistant tokens in the first row")
    return rows
