"""The viewer's HTTP server: JSON endpoints over one or two runs, frame files, play mode.

Built on the standard library's `http.server.ThreadingHTTPServer`: the viewer serves a handful of
small JSON answers and JPEG files to one local user, which needs no framework and adds no
dependency. Endpoints (all GET unless noted):

    /                         the page (viewer/static/index.html)
    /static/<file>            the page's CSS and JS
    /api/runs                 the runs being shown, their status, whether play mode is available
    /api/episodes?run=A&...   one page of the filtered, sorted episode list (+ facets)
    /api/episode?run=A&i=N    one episode's view model (or &id=EPISODE_ID), its group, its counterpart in B
    /api/compare?a=A&b=B      aggregates of two runs (or two steps) and A-B deltas, overall and per question
    /api/training?run=A       a training run: metrics per step, problems, the steps with rollouts, the probe grid
    /api/step?run=A&step=N    one training step: its metrics and groups (rewards, mean, std, advantages, token counts)
    /api/tokens?run=A@sN&id=E one trained episode's token segments (mask, texts, log-probs where recorded)
    /api/probe?run=A&sample=S one probe question at every probe step, side by side
    /frames/<run>/<path>      a frame image of a run (only image files inside that run's folder)
    POST /api/select          {"a", "b"?} -> show these runs of the folder of runs (`videoseek view PARENT`)
    /api/play/samples         the samples play mode can start
    POST /api/play/start      {"sample_id"} -> a new play session
    POST /api/play/step       {"session", "action": {...}} -> the env's answer
    POST /api/play/clues      {"session"} -> the sample's clue intervals (asked for by "show clue intervals")
    /play-frames/<session>/<turn>/<k>.jpg   a frame a play session returned

A training run's steps are runs of their own, keyed `A@s3` (RUN/rollouts/step_0003) and `A@p3`
(RUN/probes/step_0003): every episode endpoint takes those keys.

Safety: binds to 127.0.0.1 unless told otherwise; every file path is checked by
`videoseek.viewer.paths.resolve_inside`; requests whose Host header is not this server are
refused (DNS rebinding), and POSTs need `X-VideoSeek: 1`, a header a foreign web page cannot send
without a CORS preflight that this server never grants.
"""

from __future__ import annotations

import json
import math
import mimetypes
import re
import shutil
import sys
import tempfile
import threading
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from videoseek.envs.metrics import mean_metrics
from videoseek.viewer import training as tr
from videoseek.viewer import verldump
from videoseek.viewer.episode import episode_view
from videoseek.viewer.paths import UnsafePath, resolve_inside
from videoseek.viewer.rewardinfo import explain_reward, find_reward_config, reward_line
from videoseek.viewer.runindex import (
    OUTCOMES,
    SORT_KEYS,
    EpisodeQuery,
    EpisodeRow,
    RunIndex,
    facets,
    select,
)

STATIC_DIR = Path(__file__).resolve().parent / "static"
IMAGE_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp"}
MAX_BODY = 1 << 16
MAX_GROUP = 64  # group rows sent with an episode; GRPO groups are far smaller
VERSUS = ("", "agree", "disagree", "a_only", "b_only", "missing")
SUB_KEY = re.compile(r"^(A|B)@([sp])(\d+)$")  # a training step's rollouts (s) or probes (p)
SUB_KINDS = {"s": "rollouts", "p": "probes"}


class BadRequest(ValueError):
    """A request parameter the server cannot use; answered with 400 and the message."""


def clean_json(value: Any) -> Any:
    """`value` with non-finite floats replaced by None (JSON has no NaN; the page's parser rejects it)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    return value


def _float_param(params: dict[str, list[str]], name: str) -> float | None:
    text = params.get(name, [""])[0].strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{name}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise BadRequest(f"{name}: {text!r} is not a finite number")
    return value


def _int_param(params: dict[str, list[str]], name: str, default: int) -> int:
    text = params.get(name, [""])[0].strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"{name}: {text!r} is not an integer") from None


def query_from_params(params: dict[str, list[str]]) -> EpisodeQuery:
    """An `EpisodeQuery` from URL parameters; `BadRequest` names the first bad one."""
    first = lambda name: params.get(name, [""])[0].strip()
    outcome = first("outcome") or "all"
    if outcome not in OUTCOMES:
        raise BadRequest(f"outcome: {outcome!r} is not one of {', '.join(OUTCOMES)}")
    sort = first("sort") or "index"
    descending = sort.startswith("-")
    sort = sort.lstrip("-")
    if sort not in SORT_KEYS:
        raise BadRequest(f"sort: {sort!r} is not one of {', '.join(SORT_KEYS)}")
    return EpisodeQuery(
        outcome=outcome, policy=first("policy"), problem_type=first("problem_type"), task_kind=first("task_kind"),
        role=first("role"), reward_min=_float_param(params, "reward_min"), reward_max=_float_param(params, "reward_max"),
        text=first("q"), sort=sort, descending=descending,
        page=max(0, _int_param(params, "page", 0)), per_page=min(500, max(1, _int_param(params, "per_page", 50))),
    )


def versus_ok(versus: str, a: EpisodeRow, b: EpisodeRow | None) -> bool:
    """Whether the pair (episode in A, its counterpart in B) passes the comparison filter."""
    if not versus:
        return True
    if versus == "missing":
        return b is None
    if b is None:
        return False
    if versus == "agree":
        return a.correct == b.correct
    if versus == "disagree":
        return a.correct != b.correct
    if versus == "a_only":
        return a.correct is True and b.correct is not True
    return b.correct is True and a.correct is not True  # b_only


def as_list_of_dicts(value: Any, key: str) -> list[dict[str, Any]]:
    items = value.get(key) if isinstance(value, dict) else None
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []


# The tool-use means a run's aggregate shows, named as every path logs them (`videoseek.envs.metrics`).
TOOL_USE = ("calls", "crop_rate", "valid_format", "turns")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(rows: list[EpisodeRow]) -> dict[str, Any]:
    """Means over a run's origin episodes that parsed: accuracy, reward, coverage, answered, each reward
    component, and the tool-use numbers every path reports (`videoseek.envs.metrics`: calls, crop_rate,
    valid_format, turns)."""
    kept = [r for r in rows if r.role != "perturbed" and not (r.problem and not r.sample_id)]
    acc = [r.accuracy if r.accuracy is not None else float(r.correct is True) for r in kept]
    use = mean_metrics([r.facts for r in kept])
    out: dict[str, Any] = {
        "episodes": len(kept), "questions": len({r.sample_id for r in kept}), "accuracy": _mean(acc),
        "reward": _mean([r.reward for r in kept if r.reward is not None]),
        "coverage": _mean([r.coverage for r in kept if r.coverage is not None]),
        **{k: use.get(k) for k in TOOL_USE},
        "answered": _mean([float(r.prediction is not None) for r in kept]),
    }  # fmt: skip
    names = sorted({k for r in kept for k in r.reward_components})
    out["components"] = {n: _mean([r.reward_components[n] for r in kept if n in r.reward_components]) for n in names}
    return out


def compare_runs(a_rows: list[EpisodeRow], b_rows: list[EpisodeRow], a_key: str = "A", b_key: str = "B") -> dict[str, Any]:
    """Aggregates of two runs, A - B deltas overall, and per question (sample id) in both or one of them."""
    agg_a, agg_b = aggregate(a_rows), aggregate(b_rows)
    delta = {k: (agg_a[k] - agg_b[k]) if isinstance(agg_a[k], float) and isinstance(agg_b[k], float) else None
             for k in ("accuracy", "reward", "coverage", *TOOL_USE, "answered")}  # fmt: skip
    delta["components"] = {n: (agg_a["components"].get(n) - agg_b["components"][n]) if agg_a["components"].get(n) is not None and agg_b["components"].get(n) is not None else None
                           for n in sorted(set(agg_a["components"]) | set(agg_b["components"]))}  # fmt: skip

    def per_question(rows: list[EpisodeRow]) -> dict[str, dict[str, Any]]:
        out: dict[str, list[EpisodeRow]] = {}
        for r in rows:
            if r.role != "perturbed" and r.sample_id:
                out.setdefault(r.sample_id, []).append(r)
        return {sid: {"n": len(rs), "question": rs[0].question, "first": rs[0].index,
                      "accuracy": _mean([r.accuracy if r.accuracy is not None else float(r.correct is True) for r in rs]),
                      "reward": _mean([r.reward for r in rs if r.reward is not None])} for sid, rs in out.items()}  # fmt: skip

    qa, qb = per_question(a_rows), per_question(b_rows)
    questions = []
    for sid in list(qa) + [s for s in qb if s not in qa]:
        x, y = qa.get(sid), qb.get(sid)
        d = lambda k: (x[k] - y[k]) if x and y and x[k] is not None and y[k] is not None else None  # noqa: E731
        questions.append({"sample_id": sid, "question": (x or y)["question"], "a": x, "b": y, "d_accuracy": d("accuracy"), "d_reward": d("reward")})
    paired = [q for q in questions if q["d_reward"] is not None]
    paired_acc = [q["d_accuracy"] for q in questions if q["d_accuracy"] is not None]
    return {
        "a": a_key, "b": b_key, "runs": {a_key: agg_a, b_key: agg_b}, "delta": delta,
        "paired": {"questions": len(paired), "d_reward": _mean([q["d_reward"] for q in paired]), "d_accuracy": _mean(paired_acc),
                   "a_better": sum(q["d_reward"] > 1e-12 for q in paired), "b_better": sum(q["d_reward"] < -1e-12 for q in paired)},
        "questions": questions,
    }  # fmt: skip


def child_runs(folder: Path) -> list[Path]:
    """The run folders directly inside `folder` (with trajectories.jsonl, or training runs), by name."""
    try:
        entries = sorted(e for e in Path(folder).iterdir() if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []
    return [e for e in entries if (e / "trajectories.jsonl").is_file() or tr.is_training_run(e)]


def is_folder_of_runs(folder: Path) -> bool:
    """A folder that is no run itself but holds runs (`videoseek view runs/`)."""
    folder = Path(folder)
    return not (folder / "trajectories.jsonl").exists() and not tr.is_training_run(folder) and bool(child_runs(folder))


class ViewerApp:
    """The state behind the server: the runs shown and the play manager; no HTTP in here.

    Given one folder that holds runs rather than being one (`videoseek view runs/`), the runs
    inside are listed (`api_runs()["parent"]`) and `select(a, b)` picks the one to show, or two to
    compare, as if they had been named on the command line."""

    def __init__(self, run_dirs: list[Path], play: Any = None) -> None:
        if not run_dirs:
            raise ValueError("at least one run folder is needed")
        self.parent = Path(run_dirs[0]).resolve() if len(run_dirs) == 1 and is_folder_of_runs(run_dirs[0]) else None
        self.selected: list[str] = []
        self._children: dict[Path, RunIndex] = {}
        self.play = play
        self._lock = threading.RLock()  # re-entered: index_for -> steps
        self._set_runs(run_dirs)
        self._sub: dict[str, RunIndex] = {}
        self._reward_configs: dict[Path, tuple[Any, str, str | None]] = {}
        self._converted: dict[Path, tuple[tuple[int, int, int], Path]] = {}  # verl dump -> (its stat, the trajectories folder made from it)
        self._cache: Path | None = None
        self._origin: dict[Path, Path] = {}  # converted folder -> the folder of its dump (where the reward config is looked for)

    def _set_runs(self, run_dirs: list[Path]) -> None:
        keys = ["A", "B"][: len(run_dirs)]
        runs = {k: RunIndex(d, k) for k, d in zip(keys, run_dirs)}
        if self.play is not None:
            runs["play"] = RunIndex(self.play.play_dir, "play")
        with self._lock:
            self.runs: dict[str, RunIndex] = runs
            self.training = {k: tr.is_training_run(runs[k].root) for k in keys}
            self._facets: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
            self._sub = {}

    def select(self, body: dict[str, Any]) -> dict[str, Any]:
        """Show run `a` (and `b`, to compare) of the folder of runs; names as `api_runs()["parent"]` lists them."""
        if self.parent is None:
            raise BadRequest("select: the viewer was not started on a folder of runs")
        names = {p.name: p for p in child_runs(self.parent)}
        picked = []
        for field in ("a", "b"):
            name = body.get(field)
            if field == "b" and name in (None, ""):
                continue
            if not isinstance(name, str) or name not in names:
                raise BadRequest(f"{field}: {name!r} is not a run in {self.parent} (one of {', '.join(names)})")
            picked.append(name)
        if len(picked) == 2 and picked[0] == picked[1]:
            raise BadRequest("b: pick two different runs to compare")
        self._set_runs([names[n] for n in picked])
        self.selected = picked
        return self.api_runs()

    def close(self) -> None:
        """Remove the folder of trajectories converted from verl's dumps."""
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None

    def steps(self, root: Path, kind: str) -> dict[int, Path]:
        """{step: trajectories folder} of a training run: the local backend's `kind/step_NNNN/`, and
        verl's dumps `kind/<step>.jsonl` converted (viewer/verldump.py; again when the file changes)."""
        out = tr.step_dirs(root, kind)
        episode_files = verldump.episode_dump_files(root / kind)  # listed once, not once per step
        for step, dump in verldump.dump_files(root, kind).items():
            if step in out:
                continue
            try:
                st = dump.stat()
            except OSError:
                continue
            stamp = (st.st_size, st.st_mtime_ns, st.st_ino, verldump.episode_dump_stamp(episode_files, step))
            with self._lock:
                known = self._converted.get(dump)
                if known is None or known[0] != stamp:
                    if self._cache is None:
                        self._cache = Path(tempfile.mkdtemp(prefix="videoseek-view-"))
                    folder = known[1] if known else self._cache / f"{len(self._converted)}-{kind}-{step}"
                    try:
                        verldump.convert_dump(dump, folder, step)
                    except OSError:
                        continue
                    known = (stamp, folder)
                    self._converted[dump] = known
                    self._origin[folder.resolve()] = dump.parent
            out[step] = known[1]
        return dict(sorted(out.items()))

    def step_file_label(self, root: Path, kind: str, step: int) -> str:
        """How a step's episode file is named in problem texts: `rollouts/step_0003/trajectories.jsonl` or verl's `rollouts/3.jsonl`."""
        return f"{kind}/step_{step:04d}/trajectories.jsonl" if step in tr.step_dirs(root, kind) else f"{kind}/{step}.jsonl"

    def index_for(self, key: str) -> RunIndex:
        """The index of run `key`: A, B, play, or a training step `A@s3` / probes `A@p3` (made on first use)."""
        if key in self.runs:
            return self.runs[key]
        m = SUB_KEY.match(key)
        if m is None or m.group(1) not in self.runs:
            raise BadRequest(f"run: unknown run {key!r}; one of {', '.join(self.runs)} (or a training step such as A@s1)")
        with self._lock:
            if key not in self._sub:
                base = self.runs[m.group(1)].root
                folder = self.steps(base, SUB_KINDS[m.group(2)]).get(int(m.group(3)))
                if folder is None:
                    raise BadRequest(f"run: {base} has no {SUB_KINDS[m.group(2)]} for step {int(m.group(3))}")
                self._sub[key] = RunIndex(folder, key)
            return self._sub[key]

    def run(self, key: str) -> RunIndex:
        index = self.index_for(key)
        index.refresh()
        return index

    def reward_config(self, folder: Path) -> tuple[Any, str, str | None]:
        with self._lock:
            if folder not in self._reward_configs:
                self._reward_configs[folder] = find_reward_config(folder)
            return self._reward_configs[folder]

    def frame_url(self, key: str, path: str) -> str:
        return f"/frames/{key}/{quote(path)}"

    # ---- endpoints
    def api_runs(self) -> dict[str, Any]:
        out = []
        for key in self.runs:
            index = self.run(key)
            item = {"key": key, "path": str(index.root), "status": index.status, "episodes": len(index.rows()), "training": self.training.get(key, False)}
            if item["training"]:
                steps = self.steps(index.root, "rollouts")
                item["steps"] = len(steps)
                item["last_step"] = max(steps) if steps else None
                item["status"] = ""  # a training run has its episodes in step folders, not in RUN/trajectories.jsonl
            out.append(item)
        play = {"available": False, "reason": "play mode is off"}
        if self.play is not None:
            ok, reason = self.play.available()
            play = {"available": ok, "reason": reason}
        answer = {"runs": out, "compare": "B" in self.runs, "play": play, "parent": None}
        if self.parent is not None:
            answer["parent"] = {"path": str(self.parent), "selected": self.selected, "runs": [self._child_info(p) for p in child_runs(self.parent)]}
        return answer

    def _child_info(self, folder: Path) -> dict[str, Any]:
        """A run inside the folder of runs, as the run picker lists it."""
        info: dict[str, Any] = {"name": folder.name, "path": str(folder), "training": tr.is_training_run(folder)}
        if info["training"]:
            info.update(steps=len(self.steps(folder, "rollouts")), probes=len(self.steps(folder, "probes")), episodes=None, status="")
            return info
        with self._lock:
            index = self._children.setdefault(folder, RunIndex(folder, folder.name))
        index.refresh()
        info.update(episodes=len(index.rows()), status=index.status)
        return info

    def _facets_of(self, index: RunIndex, rows: list[EpisodeRow]) -> dict[str, Any]:
        stamp = (len(rows), rows[-1].offset if rows else -1)
        with self._lock:
            cached = self._facets.get(index.key)
            if cached is None or cached[0] != stamp:
                cached = (stamp, facets(rows))
                self._facets[index.key] = cached
            return cached[1]

    def api_episodes(self, params: dict[str, list[str]]) -> dict[str, Any]:
        key = params.get("run", ["A"])[0]
        index = self.run(key)
        q = query_from_params(params)
        rows = index.rows()
        other = self.run("B") if key == "A" and "B" in self.runs else None
        versus = params.get("versus", [""])[0]
        if versus not in VERSUS:
            raise BadRequest(f"versus: {versus!r} is not one of {', '.join(v for v in VERSUS if v)}")
        if other is not None and versus:
            rows = [r for r in rows if versus_ok(versus, r, other.find(r.episode_id, r.sample_id))]
        try:
            total, page = select(rows, q)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        out_rows = []
        for r in page:
            item = r.public()
            if other is not None:
                b = other.find(r.episode_id, r.sample_id)
                item["other"] = None if b is None else {"index": b.index, "episode_id": b.episode_id, "correct": b.correct, "reward": b.reward}
            out_rows.append(item)
        return {
            "run": key, "status": index.status, "total": total, "all": len(index.rows()), "page": q.page,
            "per_page": q.per_page, "rows": out_rows, "facets": self._facets_of(index, index.rows()),
        }

    def api_episode(self, params: dict[str, list[str]]) -> dict[str, Any]:
        key = params.get("run", ["A"])[0]
        index = self.run(key)
        episode_id = params.get("id", [""])[0]
        if episode_id:
            row = index.find(episode_id)
            if row is None:
                raise BadRequest(f"id: run {key} has no episode {episode_id!r}")
        else:
            i = _int_param(params, "i", -1)
            row = index.row(i)
            if row is None:
                raise BadRequest(f"i: run {key} has no episode {i} (it has {len(index.rows())})")
        raw, problem = index.read(row)
        meta = {"run": key, "index": row.index, "line": row.line}
        if raw is None:
            view: dict[str, Any] = {**meta, "episode_id": row.episode_id, "issues": [problem], "turns": [], "calls": []}
        else:
            view = episode_view(raw, index.root, lambda p: self.frame_url(key, p), meta)
            if row.problem and row.problem not in view["issues"] and "duplicate" in row.problem:
                view["issues"].append(row.problem)
            view["reward_explained"] = explain_reward(view.get("reward_components") or {}, view.get("reward"), *self.reward_config(self._origin.get(index.root, index.root)))
        m = SUB_KEY.match(key)
        view["training_ref"] = {"run": m.group(1), "kind": SUB_KINDS[m.group(2)], "step": int(m.group(3))} if m else None
        members = index.group(row) if raw is not None else []
        group = [g.public() for g in members[:MAX_GROUP]]
        if row.index not in {g["index"] for g in group} and raw is not None:
            group.append(row.public())  # the open episode is always in its own group table
        counterpart = None
        if key in ("A", "B") and "B" in self.runs:
            other_key = "B" if key == "A" else "A"
            b = self.run(other_key).find(row.episode_id, row.sample_id)
            counterpart = None if b is None else {"run": other_key, "index": b.index, "episode_id": b.episode_id}
        return clean_json({"episode": view, "group": group, "group_size": len(members), "counterpart": counterpart})

    def frame_file(self, key: str, rel: str) -> Path:
        """The image file `rel` of run `key`; `UnsafePath` outside it, `FileNotFoundError` if absent."""
        if self.parent is not None and not self.selected:
            raise FileNotFoundError("no run picked yet")  # the folder of runs itself is no run: serve nothing from it
        try:
            root = self.index_for(key).root
        except BadRequest:
            raise FileNotFoundError(f"unknown run {key!r}") from None
        target = resolve_inside(root, rel)
        if target.suffix.lower() not in IMAGE_TYPES:
            raise UnsafePath(f"only image files are served, not {target.suffix or 'files without a suffix'}")
        if not target.is_file():
            raise FileNotFoundError(rel)
        return target

    # ---- training runs
    def _training_root(self, params: dict[str, list[str]]) -> tuple[str, Path]:
        key = params.get("run", ["A"])[0]
        if key not in ("A", "B") or key not in self.runs:
            raise BadRequest(f"run: {key!r} is not one of the runs shown ({', '.join(k for k in self.runs if k != 'play')})")
        if not self.training.get(key):
            raise BadRequest(f"run: {self.runs[key].root} is not a training run (no metrics.jsonl, rollouts/step_* or probes/step_*)")
        return key, self.runs[key].root

    def metrics(self, key: str, root: Path) -> tuple[list[dict[str, Any]], list[str], str]:
        """(rows, problems, source) of a training run's per-step numbers: `metrics.jsonl`, or for a
        verl run without one (verl logs its metrics to the console) the means over each step's
        rollout dump: reward, accuracy, coverage, calls, crop_rate, valid_format, turns, reward/<component>."""
        if (root / tr.METRICS).exists() or not verldump.dump_files(root, "rollouts"):
            rows, problems = tr.read_metrics(root / tr.METRICS)
            return rows, problems, tr.METRICS
        rows = []
        for step in sorted(self.steps(root, "rollouts")):
            agg = aggregate(self.run(f"{key}@s{step}").rows())
            row = {"step": step, **{k: agg[k] for k in ("reward", "accuracy", "coverage", *TOOL_USE) if agg[k] is not None}}
            row.update({f"reward/{k}": v for k, v in agg["components"].items() if v is not None})
            row["episodes"] = float(agg["episodes"])
            rows.append(row)
        return rows, [], "verl's rollout dumps (means per step)"

    def api_training(self, params: dict[str, list[str]]) -> dict[str, Any]:
        key, root = self._training_root(params)
        rows, problems, metrics_source = self.metrics(key, root)
        series = sorted({k for r in rows for k in r if k not in ("step", "_line")}, key=lambda k: (k not in tr.MAIN_SERIES, tr.MAIN_SERIES.index(k) if k in tr.MAIN_SERIES else 0, k))
        steps = sorted(self.steps(root, "rollouts"))
        probe_steps = sorted(self.steps(root, "probes"))
        config, source, problem = self.reward_config(root)
        reward = None
        if config is not None:
            reward = reward_line(config, source)
        elif problem and (rows or steps):
            problems.append(problem)
        questions: dict[str, dict[str, Any]] = {}
        for step in probe_steps:
            index = self.run(f"{key}@p{step}")
            if index.status:
                problems.append(f"probes step {step}: {index.status}")
            for r in index.rows():
                if r.problem and not r.sample_id:
                    problems.append(f"{self.step_file_label(root, 'probes', step)} {r.problem}")
                    continue
                if r.role == "perturbed":
                    continue
                q = questions.setdefault(r.sample_id, {"sample_id": r.sample_id, "question": r.question, "cells": {}})
                q["cells"].setdefault(str(step), {"index": r.index, "episode_id": r.episode_id, "correct": r.correct, "reward": r.reward, "calls": r.calls, "prediction": r.prediction})
        return clean_json({
            "run": key, "path": str(root), "metrics": [{k: v for k, v in r.items() if k != "_line"} for r in rows], "series": series,
            "problems": problems, "steps": steps, "probe_steps": probe_steps, "probes": list(questions.values()), "reward": reward,
            "metrics_source": metrics_source,
        })  # fmt: skip

    def api_step(self, params: dict[str, list[str]]) -> dict[str, Any]:
        key, root = self._training_root(params)
        step = _int_param(params, "step", -1)
        folders = self.steps(root, "rollouts")
        if step not in folders:
            raise BadRequest(f"step: run {key} has no rollouts for step {step} (it has {', '.join(map(str, folders)) or 'none'})")
        index = self.run(f"{key}@s{step}")
        label = self.step_file_label(root, "rollouts", step)
        problems = [f"{label}: {index.status}"] if index.status else []
        problems += [f"{label} {r.problem}" for r in index.rows() if r.problem]
        grpo, problem = tr.read_json(folders[step] / "grpo.json")
        if problem and (folders[step] / "grpo.json").exists():
            problems.append(f"rollouts/step_{step:04d}/{problem}")
        grpo = grpo if isinstance(grpo, dict) else None
        rows, _, _ = self.metrics(key, root)
        metrics = next(({k: v for k, v in r.items() if k != "_line"} for r in rows if r["step"] == step), None)
        return clean_json({
            "run": key, "step": step, "key": f"{key}@s{step}", "metrics": metrics, "problems": problems,
            "grpo": grpo is not None, "tokens": (folders[step] / "tokens.jsonl").is_file(),
            "norm_adv_by_std": grpo.get("norm_adv_by_std") if grpo else None, "groups": tr.step_groups(index.rows(), grpo),
        })  # fmt: skip

    def api_tokens(self, params: dict[str, list[str]]) -> dict[str, Any]:
        key = params.get("run", [""])[0]
        m = SUB_KEY.match(key)
        if m is None or m.group(2) != "s":
            raise BadRequest(f"run: {key!r} is not a training step (such as A@s1)")
        index = self.run(key)
        episode_id = params.get("id", [""])[0]
        row = index.find(episode_id)
        if row is None:
            raise BadRequest(f"id: run {key} has no episode {episode_id!r}")
        grpo, _ = tr.read_json(index.root / "grpo.json")
        trained = next((e for e in as_list_of_dicts(grpo, "episodes") if e.get("episode_id") == episode_id), None)
        tokens, why = tr.token_row(index.root, episode_id)
        segments = tr.clean_segments(tokens.get("segments")) if tokens else tr.clean_segments((trained or {}).get("segments"))
        return clean_json({
            "run": key, "step": int(m.group(3)), "training_run": m.group(1), "episode_id": episode_id, "index": row.index,
            "group_id": row.group_id, "reward": row.reward, "correct": row.correct, "trained": trained is not None,
            "advantage": (trained or {}).get("advantage"), "group_mean": (trained or {}).get("group_mean"), "group_std": (trained or {}).get("group_std"),
            "counts": (trained or {}).get("tokens") or {}, "segments": segments, "recorded": tokens is not None,
            "note": None if tokens else (why if trained else "this episode was not trained on (perturbed, failed, or no grpo.json for this step)"),
        })  # fmt: skip

    def api_probe(self, params: dict[str, list[str]]) -> dict[str, Any]:
        key, root = self._training_root(params)
        sample_id = params.get("sample", [""])[0]
        cards, question = [], None
        for step in sorted(self.steps(root, "probes")):
            index = self.run(f"{key}@p{step}")
            row = next((r for r in index.rows() if r.sample_id == sample_id and r.role != "perturbed"), None)
            if row is None:
                cards.append({"step": step, "missing": True})
                continue
            raw, problem = index.read(row)
            question = question or {"question": row.question, "answer": row.answer}
            card = tr.episode_card(raw, row) if raw is not None else {"index": row.index, "episode_id": row.episode_id, "problem": problem}
            cards.append({"step": step, "key": f"{key}@p{step}", **card})
        if question is None:
            raise BadRequest(f"sample: no probe episode of {sample_id!r} in {root / 'probes'}")
        return clean_json({"run": key, "sample_id": sample_id, **question, "steps": cards})

    def api_compare(self, params: dict[str, list[str]]) -> dict[str, Any]:
        a_key = params.get("a", ["A"])[0] or "A"
        b_key = params.get("b", ["B"])[0] or "B"
        a, b = self.run(a_key), self.run(b_key)
        return clean_json(compare_runs(a.rows(), b.rows(), a_key, b_key) | {"paths": {a_key: str(a.root), b_key: str(b.root)}})


class Handler(BaseHTTPRequestHandler):
    """Routes requests to `ViewerApp`; every answer is JSON, a file, or a JSON error."""

    server: ViewerServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    # ---- answers
    def _send(self, status: int, body: bytes, content_type: str, cache: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, payload: Any, status: int = 200) -> None:
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json({"error": message}, status)

    def _file(self, path: Path, content_type: str | None = None, cache: bool = False) -> None:
        ctype = content_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype == "application/javascript":
            ctype += "; charset=utf-8"
        self._send(200, path.read_bytes(), ctype, cache)

    # ---- checks
    def _host_ok(self) -> bool:
        return self.server.host_allowed(self.headers.get("Host", ""))

    # ---- routing
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self._host_ok():
            return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
        url = urlsplit(self.path)
        params = parse_qs(url.query, keep_blank_values=True)
        app = self.server.app
        try:
            if url.path in ("/", "/index.html"):
                return self._file(STATIC_DIR / "index.html", "text/html")
            if url.path.startswith("/static/"):
                return self._file(resolve_inside(STATIC_DIR, url.path[len("/static/") :]))
            if url.path.startswith("/frames/"):
                key, _, rel = url.path[len("/frames/") :].partition("/")
                return self._file(app.frame_file(key, rel), IMAGE_TYPES.get(Path(rel).suffix.lower()), cache=True)
            if url.path == "/api/runs":
                return self._json(app.api_runs())
            if url.path == "/api/episodes":
                return self._json(app.api_episodes(params))
            if url.path == "/api/episode":
                return self._json(app.api_episode(params))
            if url.path == "/api/compare":
                return self._json(app.api_compare(params))
            if url.path == "/api/training":
                return self._json(app.api_training(params))
            if url.path == "/api/step":
                return self._json(app.api_step(params))
            if url.path == "/api/tokens":
                return self._json(app.api_tokens(params))
            if url.path == "/api/probe":
                return self._json(app.api_probe(params))
            if url.path == "/api/play/samples":
                return self._json(self._play().samples())
            if url.path.startswith("/play-frames/"):
                parts = url.path[len("/play-frames/") :].split("/")
                if len(parts) != 3 or not parts[2].endswith(".jpg"):
                    raise FileNotFoundError(url.path)
                return self._send(200, self._play().frame_jpeg(parts[0], parts[1], parts[2][:-4]), "image/jpeg", cache=True)
        except UnsafePath as exc:
            return self._error(HTTPStatus.FORBIDDEN, f"refused: {exc}")
        except (FileNotFoundError, IsADirectoryError, KeyError):
            return self._error(HTTPStatus.NOT_FOUND, f"not found: {url.path}")
        except BadRequest as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must cost one request, not the server
            return self._internal(exc)
        return self._error(HTTPStatus.NOT_FOUND, f"not found: {url.path}")

    def _internal(self, exc: Exception) -> None:
        sys.stderr.write(f"videoseek view: internal error on {self.path}:\n{traceback.format_exc()}")
        first = (str(exc).splitlines() or [""])[0][:300]
        return self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {type(exc).__name__}: {first}")

    def do_POST(self) -> None:
        if not self._host_ok():
            return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
        if self.headers.get("X-VideoSeek") != "1":
            return self._error(HTTPStatus.FORBIDDEN, "missing X-VideoSeek header")
        url = urlsplit(self.path)
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise BadRequest(f"request body of {length} bytes is over the {MAX_BODY} byte limit")
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except (ValueError, UnicodeDecodeError):
                raise BadRequest("request body is not JSON") from None
            if not isinstance(body, dict):
                raise BadRequest("request body must be a JSON object")
            if url.path == "/api/play/start":
                return self._json(clean_json(self._play().start(body)))
            if url.path == "/api/play/step":
                return self._json(clean_json(self._play().step(body)))
            if url.path == "/api/play/clues":
                return self._json(clean_json(self._play().clues(body)))
            if url.path == "/api/select":
                return self._json(clean_json(self.server.app.select(body)))
        except BadRequest as exc:
            return self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except KeyError as exc:
            return self._error(HTTPStatus.NOT_FOUND, f"not found: {exc.args[0] if exc.args else url.path}")
        except Exception as exc:  # noqa: BLE001 - e.g. an env bug during play: report it, keep serving
            return self._internal(exc)
        return self._error(HTTPStatus.NOT_FOUND, f"not found: {url.path}")

    def _play(self) -> Any:
        play = self.server.app.play
        if play is None:
            raise BadRequest("play mode is off (start the viewer with --data samples.jsonl)")
        ok, reason = play.available()
        if not ok:
            raise BadRequest(f"play mode is unavailable: {reason}")
        return play


class ViewerServer(ThreadingHTTPServer):
    """A `ThreadingHTTPServer` that carries the `ViewerApp` and knows its own host names."""

    daemon_threads = True

    def __init__(self, app: ViewerApp, host: str = "127.0.0.1", port: int = 8765, verbose: bool = False) -> None:
        self.app = app
        self.verbose = verbose
        super().__init__((host, port), Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def host_allowed(self, header: str) -> bool:
        """True for this server's own address and localhost names (with its port); any when bound wide."""
        host, port = self.server_address[:2]
        if host in ("0.0.0.0", "::", ""):
            return True
        names = {host, "localhost", "127.0.0.1", "[::1]"}
        return header in {f"{n}:{port}" for n in names}


def serve_in_thread(app: ViewerApp, host: str = "127.0.0.1", port: int = 0) -> tuple[ViewerServer, threading.Thread]:
    """Start a server on a background thread (port 0 picks a free port); for tests and notebooks."""
    server = ViewerServer(app, host, port)
    thread = threading.Thread(target=server.serve_forever, name="videoseek-viewer", daemon=True)
    thread.start()
    return server, thread
