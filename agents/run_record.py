"""RUN/run.json: what decides a run's result, so that it can be replayed (`videoseek rollout --from-run`).

One record for every entry point that makes episodes: `videoseek rollout`, `videoseek demo`, the
local and the verl backend of training/run_csgrpo.py, training/run_sft.py, `export-verl` (the
folder verl's stock `ToolAgentLoop` trains from) and TRL (`integrations.trl.TrajectoryRecorder`).
`run_record` builds it: the command's own fields, the env's config (`env`: tools and reward config
included), the policy, the seed, the data files with their SHA-256, the model folder with a hash of
its weights, the decoding, the package version, the git commit of the source and the versions
of the packages that decide the numbers (`RECORDED_PACKAGES`);
`write_run_record` writes it. Readers: `find_run_record` (the nearest run.json at or above a
folder: the viewer's reward panel), `reward_config_of`, `recorded_tools` (`videoseek eval`,
`export-sft`).

A run of a served policy (`openai:URL[#MODEL]`) adds `served` among the command's fields: the
endpoint (the API key's variable name, never the key), the model, the decoding and the protocol
choices (`OpenAIPolicy.record`); its responses are in RUN/openai_responses.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from videoseek.agents.cpu_kernels import cpu_kernels

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
RUN_RECORD = "run.json"


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


# The installed packages whose numbers decide a run's result: the model's kernels (torch,
# transformers), the frames it reads (PyAV decodes, Pillow writes the frame JPEGs SFT trains on,
# NumPy between them). Ranges in pyproject.toml let a fresh install pick newer releases of some.
RECORDED_PACKAGES = ("torch", "transformers", "av", "pillow", "numpy")


def package_versions() -> dict[str, str | None]:
    """{package: installed version, None if absent} of `RECORDED_PACKAGES`."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in RECORDED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


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
    from videoseek.envs.tools import DEFAULT_TOOLS

    try:
        env = json.loads((Path(run_dir) / RUN_RECORD).read_text(encoding="utf-8")).get("env")
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


def run_record(command: str, fields: dict[str, Any], *, data: list[str | Path], env: Any = None, policy: str | None = None,
               seed: int | None = None, model: str | Path | None = None, decoding: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run.json of `command`: `env` (an `EnvConfig`; its tools and reward config), `policy` and
    `seed`, then the command's own `fields` (kept at the top level, where the viewer reads them),
    `data` as resolved paths plus `data_files` with their SHA-256, `model`, `decoding` and `software`.

    `env=None` is for a command without an env (SFT); the viewer then finds no reward config.
    """
    paths = [Path(p).resolve() for p in data]
    head: dict[str, Any] = {"command": command, "policy": policy, "seed": seed}
    if env is not None:
        head["env"] = env.model_dump(mode="json")
        head["reward"] = env.reward.preset
    return {
        **head,
        **fields,
        "data": [str(p) for p in paths],
        "data_files": [{"path": str(p), "sha256": file_sha256(p) if p.is_file() else None} for p in paths],
        "model": model_record(model),
        "decoding": decoding,
        "software": {"videoseek": package_version(), "git_commit": git_commit(), "cpu_kernels": cpu_kernels(), "packages": package_versions()},
    }


def write_run_record(run_dir: str | Path, record: dict[str, Any]) -> Path:
    """Write `record` (`run_record`'s) to RUN/run.json; returns the path."""
    path = Path(run_dir) / RUN_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def find_run_record(folder: str | Path, levels: int = 2) -> tuple[Path | None, dict[str, Any] | None, str | None]:
    """(path, record, problem) of the nearest run.json in `folder` or up to `levels` folders above it
    (an episode file sits in the run, or in RUN/rollouts/step_NNNN, RUN/probes/step_NNNN, RUN/rollouts
    for verl's dumps). A run.json that is not a JSON object is the problem, and the search stops
    there: a broken record must not be passed over for an unrelated one above it."""
    here = Path(folder)
    for _ in range(levels + 1):
        path = here / RUN_RECORD
        if path.is_file():
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return path, None, f"{path}: not valid JSON"
            if not isinstance(record, dict):
                return path, None, f"{path}: not a JSON object"
            return path, record, None
        if here.parent == here:
            break
        here = here.parent
    return None, None, f"no run record ({RUN_RECORD}) in {folder} or the {levels} folders above it"


def reward_config_of(record: dict[str, Any]) -> Any:
    """The `RewardConfig` a run record holds: its env's `reward` (a config), else its `reward` (a
    preset name, as records from before the env was recorded hold it); ValueError when it has none
    or it does not validate."""
    from videoseek.rewards import RewardConfig

    env = record.get("env")
    value = env.get("reward") if isinstance(env, dict) and env.get("reward") is not None else record.get("reward")
    if value is None:
        raise ValueError("records no reward config (env.reward)")
    return RewardConfig(preset=value) if isinstance(value, str) else RewardConfig.model_validate(value)
