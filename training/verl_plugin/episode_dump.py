"""The agent loop's own episode dump, beside verl's rollout dump, for the viewer.

verl 0.9.1's v1 trainer (`trainer.use_v1: true`, the default) writes `rollout_data_dir/<step>.jsonl`
from TransferQueue with the decoded text, ground truth, score and `uid` only
(`verl/trainer/ppo/v1/trainer_base.py`, `_log_rollout_data`): the reward's extra keys, among them
`compute_score`'s `videoseek_episode`, are left out, so evidence, tool calls, reward components and the
sample's clues would be lost. verl offers no hook there, so `VideoSeekAgentLoop` writes each
episode it plays itself:

    rollout_data_dir/videoseek/<prompt step>.<host>-<pid>.jsonl
    {"key": "<uid>_<session>_0", "step": prompt step, "acc": accuracy, "videoseek_episode": JSON,
     "trajectory": the env's Trajectory (envs/trajectory.py), tool answers included}
    {"key": "<uid>/<episode id>", "group_key": "<uid>", "step": ..., "acc": ..., "trajectory": ...}

The second kind is a perturbed episode (DM-GRPO's masked group, T-GRPO's shuffled one, ...),
which the agent loop plays itself and verl never sees; `group_key` is its prompt's uid.

`key` is the TransferQueue key verl's dump lines carry as `uid` (`AgentLoopWorkerTQ`: one output
per episode, index 0), `videoseek_episode` is what `compute_score` returns under that name
(`records.episode_view`). The viewer (`viewer/verldump.py`) joins the two by key. One file per
worker process and prompt step: no two processes append to one file, and a step's episodes are
found without reading the whole run. verl does not tell an agent loop whether it plays a
validation prompt, so validation episodes are written too (their dumps do not need them).

The legacy trainer's dumps already carry every reward key, so nothing is written there. A dump
that cannot be written (disk full, no permission) is logged once and training goes on.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FOLDER = "videoseek"  # under rollout_data_dir; viewer/verldump.py SIDECAR


def dump_dir(trainer_config: Any) -> Path | None:
    """Where the v1 trainer's episodes go: `rollout_data_dir/videoseek`, or None (no dump asked
    for, or the legacy trainer, whose own dump carries the episode)."""
    trainer = trainer_config.get("trainer", {}) if hasattr(trainer_config, "get") else {}
    root = trainer.get("rollout_data_dir") if hasattr(trainer, "get") else None
    if not root or not trainer.get("use_v1", True):
        return None
    return Path(str(root)) / FOLDER


def dump_key(uid: Any, session: Any) -> str:
    """The TransferQueue key of an agent loop's single output (`AgentLoopWorkerTQ._agent_loop_postprocess`)."""
    return f"{uid}_{session}_0"


class EpisodeDump:
    """Appends one JSON line per episode to `folder/<step>.<host>-<pid>.jsonl` (thread-safe)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.tag = f"{socket.gethostname()}-{os.getpid()}"
        self._lock = threading.Lock()
        self._failed = False

    def path(self, step: int) -> Path:
        return self.folder / f"{step}.{self.tag}.jsonl"

    def write(self, key: str, step: Any, acc: float, view: str | None, trajectory: Any = None, group_key: str | None = None) -> None:
        """One episode; `view` is `records.episode_view`'s JSON string, `trajectory` the env's `Trajectory`."""
        step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else 0
        entry: dict[str, Any] = {"key": key, "step": step, "acc": float(acc)}
        if view is not None:
            entry["videoseek_episode"] = view
        if group_key is not None:
            entry["group_key"] = group_key
        if trajectory is not None:
            entry["trajectory"] = json.loads(trajectory.model_dump_json())
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        try:
            with self._lock:
                self.folder.mkdir(parents=True, exist_ok=True)
                with open(self.path(step), "a", encoding="utf-8") as f:
                    f.write(line)
        except OSError as exc:
            if not self._failed:  # once: a full disk would otherwise log every episode
                logger.warning("videoseek: cannot write the episode dump under %s (%s); the viewer will show the text only", self.folder, exc)
            self._failed = True


_DUMPS: dict[Path, EpisodeDump] = {}
_DUMPS_LOCK = threading.Lock()


def episode_dump(trainer_config: Any) -> EpisodeDump | None:
    """The process's dump for this trainer config (verl builds an agent loop per trajectory)."""
    folder = dump_dir(trainer_config)
    if folder is None:
        return None
    with _DUMPS_LOCK:
        return _DUMPS.setdefault(folder, EpisodeDump(folder))
