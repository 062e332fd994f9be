"""RUN/run.json: what decides a run's result, so that it can be replayed (`videoseek rollout --from-run`).

One function builds the record for every command that writes one (`videoseek rollout`, the local
GRPO backend of training/run_csgrpo.py, training/run_sft.py): the command's own fields, then the
data files with their SHA-256, the model folder with a hash of its weights, the policy's decoding,
the package version and the git commit of the source. The env's config is among the command's
fields (`env`, with its `tools`); `recorded_tools` reads the tools back for `videoseek eval` and
`export-sft`.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

from videoseek.agents.cpu_kernels import cpu_kernels

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def file_sha256(path: str | Path) -> str:
    """SHA-256 of one file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_sha256(folder: str | Path) -> str | None:
    """One SHA-256 over a model folder's weight files (name and bytes, in name order); None without any."""
    files = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES) and "optimizer" not in p.name)
    if not files:
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + file_sha256(p).encode())
    return h.hexdigest()


def git_commit() -> str | None:
    """The commit of the checkout this package runs from (with "-dirty" for local changes); None outside git."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("videoseek")
    except PackageNotFoundError:
        return None


def model_record(spec: str | Path | None) -> dict[str, Any] | None:
    """{"path", "weights_sha256"} of a model folder (`hf:PATH`/`vllm:PATH` or a folder); None for a scripted policy."""
    if spec is None:
        return None
    text = str(spec)
    for prefix in ("hf:", "vllm:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    path = Path(text)
    if not path.is_dir():
        return None
    return {"path": str(path.resolve()), "weights_sha256": weights_sha256(path)}


def recorded_tools(run_dir: str | Path) -> list[str] | None:
    """The tools (`EnvConfig.tools` specs, in order) of the env `RUN/run.json` records; None when
    there is no run.json or it records no env (a verl episode dump, bare `run_rollouts` output).

    A record of the one-tool days holds `tools: true`/`false` or no `tools`: the default tools / none.
    """
    import json

    from videoseek.envs.tools import DEFAULT_TOOLS

    try:
        env = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8")).get("env")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(env, dict):
        return None
    tools = env.get("tools", True)
    if tools is True or tools is None:
        return list(DEFAULT_TOOLS)
    if tools is False:
        return []
    if isinstance(tools, str):
        return [t.strip() for t in tools.split(",") if t.strip()]
    return [str(t) for t in tools] if isinstance(tools, list) else None


def run_record(command: str, fields: dict[str, Any], *, data: list[str | Path], model: str | Path | None = None,
               decoding: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run.json of `command`: its `fields` (kept at the top level, where the viewer reads them),
    `data` as resolved paths plus `data_files` with their SHA-256, `model`, `decoding` and `software`."""
    paths = [Path(p).resolve() for p in data]
    return {
        "command": command,
        **fields,
        "data": [str(p) for p in paths],
        "data_files": [{"path": str(p), "sha256": file_sha256(p) if p.is_file() else None} for p in paths],
        "model": model_record(model),
        "decoding": decoding,
        "software": {"videoseek": package_version(), "git_commit": git_commit(), "cpu_kernels": cpu_kernels()},
    }
