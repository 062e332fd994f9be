"""`videoseek view RUN [RUN_B]`: serve the replay viewer, or `--export` a self-contained HTML file.

    videoseek view runs/oracle                          # http://127.0.0.1:8765/
    videoseek view runs/oracle runs/tiny                # two runs on the same samples, side by side
    videoseek view runs/oracle --data samples.jsonl     # play mode on these samples
    videoseek view runs/oracle --export oracle.html     # one file, opens from disk, no server
    videoseek view runs                                 # a folder of runs: pick one, or two to compare, on the page
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
import time
from pathlib import Path

from videoseek.envs.errors import UserError

DEFAULT_PORT = 8765


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folder(s) with trajectories.jsonl (or a training run); give two to compare them, or a folder of runs to pick from")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks a free one)")
    parser.add_argument("--data", type=Path, default=None, help="samples.jsonl for play mode (default: the run's run.json 'data' or RUN/samples.jsonl)")
    parser.add_argument("--env-config", type=Path, default=None, help="JSON file with EnvConfig fields for play mode")
    parser.add_argument("--tools", default=None, metavar="TOOL,TOOL,...",
                        help="the tools play mode offers (EnvConfig.tools), comma-separated names or import paths "
                        "(default: --env-config's, else the tools the run's run.json records, else EnvConfig's)")  # fmt: skip
    parser.add_argument("--export", type=Path, default=None, metavar="OUT.html", help="write one self-contained HTML file instead of serving")
    parser.add_argument("--limit", type=int, default=500, help="episodes per run in an export (default 500; file order)")
    parser.add_argument("--thumb", type=int, default=160, help="longest side of exported frame thumbnails in pixels (default 160)")
    parser.add_argument("--open", action="store_true", help="open the page in the default browser")
    parser.add_argument("--verbose", action="store_true", help="log every request")


def check_runs(paths: list[str]) -> list[Path]:
    """The run folders as paths; `UserError` for more than two or one that is not a folder."""
    if len(paths) > 2:
        raise UserError(f"give one run, or two to compare, not {len(paths)}")
    runs = [Path(p) for p in paths]
    for run in runs:
        if not run.is_dir():
            raise UserError(f"{run}: not a run folder (expected a folder with trajectories.jsonl)")
    return runs


def load_env_config(path: Path | None):
    """`EnvConfig` from a JSON file, or None for the defaults."""
    if path is None:
        return None
    from pydantic import ValidationError
    from videoseek.envs import EnvConfig

    try:
        return EnvConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read env config ({exc.strerror})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"{path}: env config field {'.'.join(map(str, first['loc'])) or '?'}: {first['msg']}") from None


def play_env_config(args: argparse.Namespace, run_dir: Path):
    """The `EnvConfig` of play mode: --env-config's fields, with the tools of --tools, else of the
    env config file, else the ones the run's run.json records (so play offers the run's tools)."""
    config = load_env_config(args.env_config)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()] if args.tools is not None else None
    if tools is None and args.env_config is None:
        from videoseek.agents.run_record import recorded_tools

        tools = recorded_tools(run_dir)
    if tools is None:
        return config
    from videoseek.envs import EnvConfig

    try:
        return EnvConfig.model_validate({**(config.model_dump() if config is not None else {}), "tools": tools})
    except ValueError as exc:  # pydantic's ValidationError is a ValueError: "unknown tool 'x'; ..."
        first = exc.errors()[0]["msg"].removeprefix("Value error, ") if hasattr(exc, "errors") else str(exc)
        raise UserError(f"--tools: {first}") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    runs = check_runs(args.runs)
    if args.export is not None:
        from videoseek.viewer.export import export_runs
        from videoseek.viewer.server import child_runs, is_folder_of_runs

        for run in runs:
            if is_folder_of_runs(run):
                names = ", ".join(p.name for p in child_runs(run))
                raise UserError(f"{run}: a folder of runs ({names}); export one of them: videoseek view {run / child_runs(run)[0].name} --export ...")

        if args.limit < 1 or args.thumb < 16:
            raise UserError("--limit must be at least 1 and --thumb at least 16")
        report = export_runs(runs, args.export, limit=args.limit, thumb=args.thumb)
        left = sum(report.skipped.values())
        note = f"; {left} episodes left out by --limit {args.limit}" if left else ""
        print(f"wrote {report.path} ({report.bytes / 1e6:.1f} MB, {sum(report.episodes.values())} episodes, {report.frames} frames{note})")
        return 0

    from videoseek.viewer.play import PlayManager, find_samples_file
    from videoseek.viewer.server import ViewerApp, ViewerServer

    data = args.data
    if data is not None and not data.is_file():
        raise UserError(f"{data}: --data file not found")
    play = PlayManager(data or find_samples_file(runs[0]), runs[0] / "play", play_env_config(args, runs[0]))
    app = ViewerApp(runs, play=play)
    started = time.perf_counter()
    parent = app.api_runs()["parent"]
    if parent is not None:
        print(f"{parent['path']}: a folder of {len(parent['runs'])} runs (pick one, or two to compare, on the page):")
        for child in parent["runs"]:
            what = f"training run, {child['steps']} steps with rollouts" if child["training"] else f"{child['episodes']} episodes"
            print(f"  {child['name']}: {what}{' (' + child['status'] + ')' if child['status'] else ''}")
    for info in ([] if parent is not None else app.api_runs()["runs"]):  # index now, so the first page load does not wait for it
        if info["key"] == "play" and not info["episodes"]:
            continue
        note = f" ({info['status']})" if info["status"] else ""
        if info.get("training"):
            print(f"run {info['key']}: {info['path']}: training run, {info['steps']} steps with rollouts")
        else:
            print(f"run {info['key']}: {info['path']}: {info['episodes']} episodes{note}")
    print(f"indexed in {time.perf_counter() - started:.1f} s", flush=True)
    try:
        server = ViewerServer(app, args.host, args.port, verbose=args.verbose)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port} ({exc.strerror}); try --port 0 for a free port") from None
    if not is_loopback(args.host):
        print(f"warning: serving on {args.host}, reachable from other machines", file=sys.stderr)
    print(f"VideoSeek viewer on {server.url}  (Ctrl-C to stop)", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        app.close()
    return 0
