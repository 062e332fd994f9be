"""`videoseek eval RUN`: metrics of a run's trajectories, printed and written to `RUN/metrics.json`.

Metrics are over origin episodes (perturbed groups are reported separately, by perturbation
kind): accuracy overall, by problem type and by task kind; clue coverage, evidence score, mean of
each reward component, failures; and the tool-use numbers every path reports, defined in
`videoseek.envs.metrics`: accepted calls per episode (`calls`), invalid calls, valid-format rate,
`crop_rate` (the share of episodes with at least one accepted call, whatever the tool), turns and
tokens per episode; and the invalid-call rate (invalid calls / all tool calls). `intervals` holds
a 95 % interval of the mean of each per-episode metric.

Per tool (`calls_per_tool`, `tool_rate`): the accepted calls of each tool per episode, and the
share of episodes with at least one accepted call of it (`calls/<tool>` and `tool_rate/<tool>` in
`envs.metrics`). The tools are the run's configured ones (`RUN/run.json`'s env, so a tool the
policy never calls shows as 0) followed by any other tool the episodes called; the records say
which tool each call was (`CallInfo.tool`), version-1 files included, so `eval` takes no tool
list of its own.

`--benchmark NAME` adds that benchmark's official numbers (`videoseek.envs.benchmarks`, one module
a benchmark, imported only then): computed from the trajectories and the run's samples (the
`--data` file, default the one `RUN/run.json` names), printed as the benchmark's paper tables them,
and written to `metrics.json` under "benchmark" beside the metrics above. `--judge` rates the
open answers of a judged benchmark (V-STaR) with an LLM; its replies are cached in
`verdicts.jsonl` beside `metrics.json` (`videoseek.agents.judge`).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from videoseek.envs.metrics import facts_of_trajectory, invalid_call_rate, look_on_rate, mean_metrics, metrics_of, reading_by_answer, reported_tools, shown_rate
from videoseek.envs.trajectory import Trajectory


def _mean(xs: Sequence[float]) -> float | None:
    xs = [float(x) for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None


def mean_interval(xs: Sequence[float], z: float = 1.96) -> tuple[float, float, float]:
    """(mean, low, high): the mean with its normal-approximation 95 % interval, mean ± z·s/√n.

    With n of 64 or more episodes the central limit theorem makes this close to a bootstrap
    interval; for n < 2 the interval is the mean itself.

    >>> [round(v, 4) for v in mean_interval([1.0, 0.0, 1.0, 0.0])]
    [0.5, -0.0658, 1.0658]
    """
    a = np.asarray(list(xs), dtype=np.float64)
    if a.size == 0:
        return (float("nan"),) * 3
    m = float(a.mean())
    half = z * float(a.std(ddof=1)) / float(np.sqrt(a.size)) if a.size > 1 else 0.0
    return m, m - half, m + half


def episode_metrics(traj: Trajectory, tools: Sequence[str] = ()) -> dict[str, float]:
    """One episode's numbers: its outcome (accuracy, correct, coverage, evidence score, reward) and
    its tool use (`envs.metrics.metrics_of`: calls, `calls/<tool>` and `tool_rate/<tool>` for the
    configured `tools` and any tool it called, crop_rate, invalid_calls, valid_format, turns, tokens)."""
    final = traj.turns[-1].evidence if traj.turns else {}
    return {
        "accuracy": float(traj.accuracy or 0.0),
        "correct": float(bool(traj.correct)),
        "coverage": float(final.get("coverage") or 0.0),
        "evidence": float(final.get("score") or 0.0),
        "reward": float(traj.reward),
        **metrics_of(facts_of_trajectory(traj), tools),
    }


def run_tools(run_dir: Path) -> list[str]:
    """The names of the tools `RUN/run.json` says the run's env had, in order; [] when it does not say.

    A tool given by an import path that no longer imports is left out (its calls still show, by
    the name the records hold).
    """
    from videoseek.agents.run_record import recorded_tools
    from videoseek.envs.tools import tool_names

    names: list[str] = []
    for spec in recorded_tools(run_dir) or []:
        try:
            names.append(tool_names([spec])[0])
        except ValueError:
            continue
    return names


def summarize(trajs: Sequence[Trajectory], tools: Sequence[str] = ()) -> dict[str, Any]:
    """Aggregate metrics of a list of trajectories (see the module docstring); `tools`: the
    configured tools' names, reported per tool even when never called."""
    origin = [t for t in trajs if t.group.role == "origin"]
    ok = [t for t in origin if t.failure is None]
    facts = [facts_of_trajectory(t) for t in ok]
    names = reported_tools(facts, tools)
    per = [episode_metrics(t, names) for t in ok]
    use = mean_metrics(facts, names)  # the tool-use means every path reports (envs.metrics)
    out: dict[str, Any] = {"episodes": len(origin), "failures": len(origin) - len(ok)}
    for key in ("accuracy", "correct", "coverage", "evidence", "reward"):
        out[key] = _mean([m[key] for m in per])
    for key in ("calls", "invalid_calls", "turns", "tokens", "valid_format", "crop_rate"):
        out[key] = use.get(key)
    keys = ("accuracy", "correct", "coverage", "evidence", "calls", "turns", "tokens", "reward", "valid_format", "crop_rate")
    out["intervals"] = {key: list(mean_interval([m[key] for m in per])[1:]) for key in keys} if per else {}
    out["invalid_call_rate"] = invalid_call_rate(facts)
    look = look_on_rate(ok)  # envs.metrics.look_on: None when no episode's first two crops both missed
    out["look_on"], out["look_on_n"] = look.get("look_on"), int(look["look_on_n"])
    shown = shown_rate(ok)  # envs.metrics.clue_shown: search (a frame showed the clue) and reading apart
    out["clue_shown"] = {key: shown.get(key) for key in ("shown", "accuracy_shown", "accuracy_unshown")} | {"n": int(shown["shown_n"])}
    out["clue_shown"]["by_answer"] = reading_by_answer(ok)  # which options the reader confuses
    out["calls_per_tool"] = {name: use.get(f"calls/{name}") for name in names}
    out["tool_rate"] = {name: use.get(f"tool_rate/{name}") for name in names}
    comps: dict[str, list[float]] = defaultdict(list)
    for t in ok:
        for k, v in t.reward_components.items():
            comps[k].append(v)
    out["reward_components"] = {k: _mean(v) for k, v in sorted(comps.items())}
    for field, key in (("problem_type", "by_problem_type"), ("task_kind", "by_task_kind"), ("policy", "by_policy")):
        groups: dict[str, list[float]] = defaultdict(list)
        for t, m in zip(ok, per):
            groups[str(getattr(t, field) or "none")].append(m["accuracy"])
        out[key] = {k: {"accuracy": _mean(v), "n": len(v)} for k, v in sorted(groups.items())}
    perturbed: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        if t.group.role == "perturbed" and t.group.perturbation:
            perturbed[t.group.perturbation.get("kind", "?")].append(t)
    out["perturbed"] = {
        k: {"episodes": len(v), "accuracy": _mean([float(t.accuracy or 0.0) for t in v if t.failure is None])} for k, v in perturbed.items()
    }
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="run directory with trajectories.jsonl, or a verl run (its episode dump RUN/rollouts/videoseek/)")
    parser.add_argument("--step", type=int, default=None, help="a verl run: the prompt step whose episodes to score (default: the latest)")
    parser.add_argument("--out", type=Path, default=None, help="where to write metrics (default RUN/metrics.json)")
    from videoseek.envs.benchmarks import BENCHMARKS  # the registry; imports no benchmark module

    parser.add_argument("--benchmark", default=None, metavar="NAME", choices=tuple(BENCHMARKS),
                        help=f"also compute this benchmark's official metrics ({', '.join(BENCHMARKS)}; docs/benchmarks.md)")
    parser.add_argument("--data", type=Path, default=None,
                        help="--benchmark: the samples.jsonl the run was made from (default: the one RUN/run.json names)")
    parser.add_argument("--judge", default=None, metavar="openai:URL[#MODEL]|file:VERDICTS.jsonl|hf:PATH|vllm:PATH",
                        help="--benchmark: the LLM judge of benchmarks that rate open answers (vstar): a served model over the OpenAI "
                        "API, a verdicts file to replay, or a model loaded here; its replies are cached in verdicts.jsonl beside the "
                        "metrics; default an offline substitute")


def run_samples(run_dir: Path, data: Path | None) -> dict[str, Any]:
    """The samples of a run by id: from `data`, or from the files `run_dir/run.json` names."""
    from videoseek.envs.sample import VideoSample

    from videoseek.envs.errors import UserError

    if data is not None:
        paths = [data]
    else:
        meta = run_dir / "run.json"
        if not meta.is_file():
            raise UserError(f"{meta}: not found, so the run's samples are unknown; pass --data samples.jsonl")
        try:
            paths = [Path(p) for p in json.loads(meta.read_text(encoding="utf-8"))["data"]]
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{meta}: no 'data' list of sample files; pass --data samples.jsonl") from None
    samples: dict[str, Any] = {}
    for path in paths:
        if not path.is_file():
            raise UserError(f"{path}: the run's samples file is not found; pass --data samples.jsonl")
        for sample in VideoSample.from_jsonl(path):
            samples.setdefault(sample.id, sample)
    return samples


def benchmark_metrics(name: str, trajs: Sequence[Trajectory], samples: dict[str, Any], judge: str | None = None,
                      verdicts: Path | None = None) -> tuple[dict[str, Any], str]:
    """(metrics, table) of benchmark `name` over `trajs`; `UserError` (one line) for an unknown
    benchmark, a module that cannot be imported, a --judge it does not take (or cannot build or
    reach), or data it cannot score. `verdicts`: the judge's verdict cache (JSONL)."""

    from videoseek.envs.benchmarks import benchmark_module

    from videoseek.envs.errors import UserError

    try:
        module = benchmark_module(name)
    except ValueError as exc:
        raise UserError(f"--benchmark: {exc}") from None
    except ImportError as exc:
        raise UserError(f"--benchmark {name}: its module cannot be imported ({exc})") from None
    kwargs: dict[str, Any] = {}
    if judge is not None:
        if not hasattr(module, "JUDGE_PROMPTS"):
            raise UserError(f"--judge: benchmark {name} has no judged answers")
        from videoseek.agents.judge import JudgeError, judge_from_spec

        try:
            kwargs["judge"] = judge_from_spec(judge, *module.JUDGE_PROMPTS, cache=verdicts, max_tokens=512)
        except (JudgeError, ImportError) as exc:
            raise UserError(f"--benchmark {name}: {str(exc).splitlines()[0]}") from None
        kwargs["judge_name"] = judge
    try:
        metrics = module.benchmark_metrics(trajs, samples, **kwargs)
    except (ValueError, KeyError, ImportError) as exc:  # ImportError: a --judge backend not installed
        raise UserError(f"--benchmark {name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return metrics, module.format_table(metrics)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from videoseek.envs.trajectory import read_episode_dump, read_trajectories

    from videoseek.envs.errors import UserError

    path = args.run / "trajectories.jsonl"
    dump = args.run / "rollouts" / "videoseek"
    if path.is_file():
        trajs = read_trajectories(path)
    elif dump.is_dir():  # a verl run (e.g. the trainer.val_only evaluation): the agent loop's episode dump
        step, trajs = read_episode_dump(dump, args.step)
        path = dump
        print(f"verl run: the agent loop's episodes of prompt step {step} ({dump})")
    else:
        raise UserError(f"{path}: no trajectories.jsonl in the run directory (nor a verl episode dump, {dump})")
    if not trajs:
        raise UserError(f"{path}: no readable episodes" + (f" at step {args.step}" if args.step is not None else ""))
    metrics = summarize(trajs, run_tools(args.run))
    table_text = None
    out = args.out or args.run / "metrics.json"
    if args.benchmark is not None:
        bench, table_text = benchmark_metrics(args.benchmark, trajs, run_samples(args.run, args.data), args.judge,
                                              verdicts=out.parent / "verdicts.jsonl")
        metrics["benchmark"] = {"name": args.benchmark, **bench}
    elif args.judge is not None or args.data is not None:
        raise UserError("--judge and --data go with --benchmark NAME")
    out.write_text(json.dumps(metrics, indent=2))
    if table_text is not None:
        print(table_text)
        print(f"metrics written to {out}")
        return 0
    # Labels are text, not markup: rich would read "accuracy[multiple_choice]" as a style tag and drop it.
    table = Table(title=escape(f"{args.run} ({metrics['episodes']} episodes)"))
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("accuracy", "coverage", "evidence", "calls", "invalid_call_rate", "valid_format", "crop_rate", "turns", "tokens", "reward", "failures"):
        v = metrics[key]
        table.add_row(key, "-" if v is None else f"{v:.3f}")
    for k, v in metrics["calls_per_tool"].items():
        rate = metrics["tool_rate"][k]
        table.add_row(escape(f"calls[{k}]"), "-" if v is None else f"{v:.3f} (episodes with one: {rate:.3f})")
    for k, v in metrics["reward_components"].items():
        table.add_row(escape(f"reward.{k}"), "-" if v is None else f"{v:.3f}")
    for k, v in metrics["by_problem_type"].items():
        table.add_row(escape(f"accuracy[{k}]"), f"{v['accuracy']:.3f} (n={v['n']})")
    for k, v in metrics["by_task_kind"].items():
        table.add_row(escape(f"accuracy[{k}]"), f"{v['accuracy']:.3f} (n={v['n']})")
    Console().print(table)
    print(f"metrics written to {out}")
    return 0
