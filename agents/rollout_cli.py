"""`videoseek rollout`: run a policy over a dataset and write `RUN/trajectories.jsonl`.

Every video is checked before the first episode (open, metadata, one decoded frame): a bad row is
one line naming the row, the sample, the path and the cause, and the run stops with exit code 2
unless `--skip-bad` drops those rows (the same lines, as warnings). An episode that still fails
mid-run is reported on stderr with its reason after the others finish, and the exit code is 1;
a rerun into the same folder plays the failed episodes' samples again (`rerun_failed_episodes`).

RUN/run.json records what decides the result (`videoseek.agents.run_record`): the arguments, the
env's config (its `tools` included), the data files with their SHA-256, the model's weights hash,
the policy's decoding, the package version and the git commit. `--from-run RUN --out NEW` plays the
recorded run again with those arguments (a record from before `--tools` with the default tools);
it refuses when a data file or the model's weights no longer match their recorded hash.

`--tools crop_video,zoom` sets the env's tools (`EnvConfig.tools`: registered names or import paths
such as `examples/custom_tool.py:FrameAtTool`); the prompt, `info["tools"]` and the model
policies' tool schemas follow them. `--no-tools` is the no-tool baseline (`tools=[]`, one turn).

`--policy openai:URL[#MODEL]` plays a served model (`agents.openai_policy`; docs/serving.md): the
`--openai-*` flags choose the protocol, `--concurrency`, `--timeout`, `--retries` and
`--api-key-env` the client; every response is kept in RUN/openai_responses.jsonl, run.json's
`served` records the endpoint (never the key), the model and the choices, and `--from-run`
replays such a run from its responses with the server down.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from videoseek.agents.groups import LOOK_ON_STARTS
    from videoseek.rewards.presets import DEFAULT_PRESET, preset_help

    parser.add_argument("--data", type=Path, default=None, help="samples.jsonl (required unless --from-run)")
    parser.add_argument("--from-run", type=Path, default=None, metavar="RUN",
                        help="replay the run recorded in RUN/run.json (its data, policy, decoding, env and seed) into --out")
    parser.add_argument("--policy", default="oracle",
                        help="oracle | uniform | random | no-tool | hf:PATH | vllm:PATH | openai:URL[#MODEL] (a served model: docs/serving.md)")
    parser.add_argument("--out", type=Path, required=True, help="run directory (resumable: finished samples are skipped)")
    parser.add_argument("--group-size", type=int, default=1, help="episodes per sample (G)")
    parser.add_argument("--perturb", action="append", default=[], choices=["mask", "shuffle", "blend"],
                        help="also run a perturbed group: mask (DM-GRPO), shuffle (T-GRPO), blend (SF-GRPO); repeatable")  # fmt: skip
    parser.add_argument("--reward", default=DEFAULT_PRESET, help=f"reward preset, with its counted components: {preset_help()}; docs/rewards.md (default: %(default)s)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N samples (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env resets and the policies' sampling")
    parser.add_argument("--max-turns", type=int, default=None, help="assistant turns per episode (default: EnvConfig's, 8)")
    parser.add_argument("--max-pixels", type=int, default=None, help="per-frame pixel budget (default: EnvConfig's, 224x224)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="any other EnvConfig field, e.g. --env initial_frames=4 (repeatable)")
    parser.add_argument("--tools", default=None, metavar="TOOL,TOOL,...",
                        help="the tools the agent may call (EnvConfig.tools), comma-separated: registered names (crop_video, zoom) "
                        "or import paths 'package.module:Class' / 'path/to/file.py:Class' (default: EnvConfig's, crop_video)")  # fmt: skip
    parser.add_argument("--no-tools", action="store_true",
                        help="the no-tool baseline: one turn, --frames uniformly sampled frames, no tool in the prompt "
                        "(hf:, vllm: and the scripted no-tool policy; docs/benchmarks.md)")  # fmt: skip
    parser.add_argument("--frames", type=int, default=None, help="frames shown at reset (EnvConfig.initial_frames, default 8)")
    parser.add_argument("--look-on-probe", nargs="?", const="two_misses", default=None, choices=LOOK_ON_STARTS, metavar="KIND",
                        help="the look-on probe: the first two turns crop two windows without a clue, then --policy decides "
                        "(agents.groups.look_on_start; `videoseek eval` reports the look-on rate of every probed episode); "
                        "KIND first_window: the first turn crops the first quarter window, whatever it shows")  # fmt: skip
    parser.add_argument("--device", default="cpu", help="model policies: cpu or cuda")
    parser.add_argument("--threads", type=int, default=None,
                        help="model policies on CPU: torch threads (default: torch's own, from OMP_NUM_THREADS or the cores); "
                             "CPU sums split by thread count, so run.json records it and --from-run restores it")
    parser.add_argument("--no-kv-reuse", dest="reuse_kv", action="store_false",
                        help="hf: policies: prefill every turn's whole conversation instead of continuing from the last turn's "
                             "keys and values (agents.hf_policy.TurnCache; the same tokens, slower)")  # fmt: skip
    parser.add_argument("--max-new-tokens", type=int, default=256, help="model policies: tokens per turn")
    parser.add_argument("--temperature", type=float, default=1.0, help="model policies: sampling temperature (0: greedy)")
    parser.add_argument("--top-p", type=float, default=1.0, help="model policies: nucleus sampling mass (default 1: off)")
    parser.add_argument("--top-k", type=int, default=None, help="model policies: sample among the k likeliest tokens (default: off)")
    served = parser.add_argument_group("served models (--policy openai:URL[#MODEL]; docs/serving.md, 'Evaluate a served model')")
    served.add_argument("--openai-frames", choices=["video", "images"], default="video",
                        help="each message's frames as one video_url of JPEG frames (vLLM) or one image_url per frame (default: video)")
    served.add_argument("--openai-frame-times", choices=["auto", "text"], default="auto",
                        help="auto: also send the frames' times as vLLM's media_io_kwargs when the request's videos share one set of "
                             "times (needs --trust-request-mm-kwargs; refused: labels only); text: the 'Frames at ...' labels only")  # fmt: skip
    served.add_argument("--openai-tools", choices=["text", "native"], default="text",
                        help="text: the env's tool protocol in the prompt (any server); native: the tools parameter and the reply's "
                             "tool_calls mapped back to the env's actions (vLLM: --enable-auto-tool-choice --tool-call-parser hermes)")  # fmt: skip
    served.add_argument("--openai-extras", choices=["vllm", "none"], default="vllm",
                        help="vllm: send vLLM's own request fields (top_k, include_stop_str_in_output, media_io_kwargs, ...); "
                             "none: OpenAI's fields only (hosted APIs)")  # fmt: skip
    served.add_argument("--openai-no-n", dest="openai_share", action="store_false",
                        help="send each episode's first turn alone, not one request with n = the group's episodes")
    served.add_argument("--openai-token-ids", action="store_true",
                        help="ask vLLM for the prompt and completion token ids (return_token_ids)")
    served.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default 8)")
    served.add_argument("--timeout", type=float, default=300.0, help="seconds a request may take before it is retried (default 300)")
    served.add_argument("--retries", type=int, default=4,
                        help="tries after the first for 429s, 5xx answers, connection errors and timeouts, with backoff (default 4)")
    served.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
                        help="the environment variable holding the API key (default OPENAI_API_KEY; never recorded)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--skip-bad", action="store_true",
                        help="drop rows whose video is missing, empty, truncated or not a video (warned) instead of stopping")  # fmt: skip


# The arguments that decide a run's result: recorded in run.json, restored by --from-run.
REPLAYED = ("data", "policy", "group_size", "perturb", "reward", "limit", "seed", "max_turns", "max_pixels", "env", "tools", "no_tools",
            "frames", "device", "threads", "reuse_kv", "max_new_tokens", "temperature", "top_p", "top_k",
            "openai_frames", "openai_frame_times", "openai_tools", "openai_extras", "openai_share", "openai_token_ids", "concurrency",
            "timeout", "retries", "api_key_env", "look_on_probe")  # fmt: skip
# Recorded since these were added; older records replay with torch's default thread count,
# without the turn cache (a split batch samples its continued rows with a seed of their own) and
# with the default tools (the only ones there were; --no-tools and --env are replayed as recorded).
OPTIONAL = {"threads": None, "reuse_kv": False, "tools": None, "openai_frames": "video", "openai_frame_times": "auto", "openai_tools": "text",
            "openai_extras": "vllm", "openai_share": True, "openai_token_ids": False, "concurrency": 8, "timeout": 300.0, "retries": 4,
            "api_key_env": "OPENAI_API_KEY", "look_on_probe": False}  # fmt: skip


def probe_kind(recorded: bool | str | None) -> str:
    """The probe's kind of forced start; records before the kinds existed hold True (two_misses) or False."""
    return recorded if isinstance(recorded, str) else "two_misses"


def restore_args(args: argparse.Namespace) -> None:
    """Set `args` to the ones recorded in `args.from_run`/run.json; UserError when the record does not fit."""
    from videoseek.agents.run_record import file_sha256, model_record
    from videoseek.envs.errors import UserError

    meta = args.from_run / "run.json"
    if args.data is not None:
        raise UserError("--from-run replays the recorded --data; drop --data")
    if not meta.is_file():
        raise UserError(f"--from-run: {meta} does not exist")
    record = json.loads(meta.read_text())
    recorded = record.get("args")
    if record.get("command") != "rollout" or not isinstance(recorded, dict):
        raise UserError(f"--from-run: {meta} is not the record of a `videoseek rollout` run (no recorded args)")
    if args.out.resolve() == args.from_run.resolve():
        raise UserError("--from-run: --out must be a new folder, not the recorded run")
    for key in REPLAYED:
        setattr(args, key, recorded.get(key, OPTIONAL[key]) if key in OPTIONAL else recorded[key])
    args.data = Path(args.data)
    for entry in record.get("data_files", []):
        if entry["sha256"] is not None and (not Path(entry["path"]).is_file() or file_sha256(entry["path"]) != entry["sha256"]):
            raise UserError(f"--from-run: {entry['path']} is missing or changed since the recorded run (SHA-256 differs)")
    # A served run replays from its recorded responses, with the model it was served as.
    args.served_record = record.get("served") if isinstance(record.get("served"), dict) else None
    model = record.get("model")
    if model and model_record(model["path"]) != model:
        raise UserError(f"--from-run: the model {model['path']} is missing or its weights changed since the recorded run")


def run(args: argparse.Namespace) -> int:
    from videoseek.agents.cpu_kernels import pin_cpu_kernels
    from videoseek.agents.evaluate import episode_metrics
    from videoseek.agents.policy import load_policy, policy_kind
    from videoseek.agents.rollout import run_rollouts
    from videoseek.agents.run_record import run_record, write_run_record
    from videoseek.envs.errors import UserError
    from videoseek.envs.env import EnvConfig
    from videoseek.envs.sample import iter_jsonl_rows
    from videoseek.rewards import RewardConfig

    if args.from_run is not None:
        restore_args(args)
    if args.data is None:
        raise UserError("--data is required (or --from-run RUN)")
    rows = list(iter_jsonl_rows(args.data))
    if args.limit:
        rows = rows[: args.limit]
    if args.group_size < 1:
        raise UserError("--group-size must be at least 1")
    if args.top_k is not None and args.top_k < 1:
        raise UserError(f"--top-k must be at least 1, got {args.top_k}")
    try:
        reward = RewardConfig(preset=args.reward)
    except ValueError as exc:  # pydantic's ValidationError names the preset and the choices
        raise UserError(f"--reward: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}") from None
    overrides = {k: v for k, v in (("max_turns", args.max_turns), ("max_pixels", args.max_pixels)) if v is not None}
    overrides |= no_tool_overrides(args)
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or key not in EnvConfig.model_fields or key == "reward":
            raise UserError(f"--env {item!r}: expected KEY=VALUE with KEY an EnvConfig field other than reward")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:  # a bare word: video_backend=torchcodec (EnvConfig checks it)
            overrides[key] = value
    try:
        config = EnvConfig(reward=reward, **overrides)
    except ValueError as exc:
        raise UserError(f"--env: {str(exc).splitlines()[0]}: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else ''}") from None
    kwargs: dict = {}
    decoding: dict = {"seed": args.seed}
    kind = policy_kind(args.policy)
    if ":" in args.policy:
        decoding |= {"temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k, "max_new_tokens": args.max_new_tokens}
        kwargs = {**decoding} if kind == "openai" else {"device": args.device, **decoding}
        kwargs["tools"] = list(config.tools)  # the env's tools (its info["tools"] says the same every turn)
        if args.policy.startswith("hf:"):
            kwargs["reuse_kv"] = args.reuse_kv
    if kind == "openai":
        kwargs |= served_policy_kwargs(args)

    def policy_or_error():
        try:
            return load_policy(args.policy, **kwargs)
        except (ValueError, OSError) as exc:
            raise UserError(str(exc).splitlines()[0]) from None

    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be at least 1, got {args.threads}")
    if args.policy.startswith("hf:"):
        pin_cpu_kernels()  # before the videos are decoded: a model's CPU numbers then match on other machines
        import torch

        if args.threads is not None:
            torch.set_num_threads(args.threads)
        args.threads = torch.get_num_threads()  # recorded: the count the sums were split by, set or not
    # Scripted (and unknown) policies load at once; a model loads only after the videos pass the
    # pre-check (it takes minutes, and bad videos are found in seconds).
    policy = None if kind in ("hf", "vllm") else policy_or_error()
    samples = precheck_videos(rows, args.data, config.video_backend, skip_bad=args.skip_bad)
    policy = policy or policy_or_error()
    args.out.mkdir(parents=True, exist_ok=True)
    # What the run was made from: the viewer's play mode finds the dataset here.
    recorded = {key: str(getattr(args, key)) if key == "data" else getattr(args, key) for key in REPLAYED}
    fields = {"group_size": args.group_size, "perturbations": args.perturb, "args": recorded}
    if args.from_run is not None:
        fields["replay_of"] = str(args.from_run.resolve())
    if kind == "openai":  # the endpoint (never the key), model, decoding and protocol choices
        fields["served"] = policy.record()
    resumed = rerun_failed_episodes(args.out)
    if resumed:
        print(f"videoseek rollout: resuming {resumed} failed episode(s) of an earlier run", file=sys.stderr)
    write_run_record(args.out, run_record("rollout", fields, data=[args.data], env=config, policy=args.policy, seed=args.seed,
                                          model=args.policy if ":" in args.policy else None, decoding=decoding))
    # Streamed: the trajectories go to the run folder, and only each episode's metrics stay here,
    # so memory does not grow with the run (bench/bench_rollout_memory.py).
    origin: list[dict] = []
    failed: list[str] = []
    written = 0

    def tally(t) -> None:
        nonlocal written
        written += 1
        if t.failure:
            failed.append(f"episode {t.episode_id} (sample {t.sample_id}) failed: {t.failure}")
        if t.group.role == "origin":
            origin.append(episode_metrics(t) if t.failure is None else {})

    # A served policy answers a turn's requests `--concurrency` at a time: keep that many episodes live.
    live = max(64, 2 * args.concurrency) if kind == "openai" else 64
    try:
        run_rollouts(samples, policy, group_size=args.group_size, perturbations=args.perturb, env_config=config, out_dir=args.out,
                     seed=args.seed, progress=not args.no_progress, on_episode=tally, keep=False, batch_episodes=live,
                     look_on_share=1.0 if args.look_on_probe else 0.0, look_on_starts=[probe_kind(args.look_on_probe)])  # fmt: skip
    finally:
        if kind == "openai":  # the resolved model and the request counts
            fields["served"] = policy.record()
            write_run_record(args.out, run_record("rollout", fields, data=[args.data], env=config, policy=args.policy, seed=args.seed,
                                                  model=None, decoding=decoding))  # fmt: skip
            policy.close()
    ok = [m for m in origin if m]
    # Both counts: `episodes` are the origin episodes the metrics describe; the perturbed groups' are written too.
    m = {"episodes": len(origin), "perturbed_episodes": written - len(origin), "failures": len(origin) - len(ok)}
    m |= {k: sum(e[k] for e in ok) / len(ok) if ok else None for k in ("accuracy", "coverage", "evidence", "calls", "reward")}
    print(json.dumps({k: m[k] for k in ("episodes", "perturbed_episodes", "accuracy", "coverage", "evidence", "calls", "reward", "failures")}))
    print(f"trajectories: {args.out / 'trajectories.jsonl'}")
    for line in failed:
        print(f"videoseek rollout: error: {line}", file=sys.stderr)
    if failed:
        print(f"videoseek rollout: {len(failed)} of {written} episodes failed", file=sys.stderr)
    return 1 if failed else 0


def served_policy_kwargs(args: argparse.Namespace) -> dict:
    """`OpenAIPolicy` keywords of the served-model flags: the protocol, the client, and the run's
    response cache (RUN/openai_responses.jsonl). With --from-run the recorded run's responses are
    replayed offline (no server) with the model it was served as."""
    from videoseek.agents.openai_policy import CACHE_FILE
    from videoseek.envs.errors import UserError

    for flag, value, least in (("--concurrency", args.concurrency, 1), ("--retries", args.retries, 0)):
        if value < least:
            raise UserError(f"{flag} must be at least {least}, got {value}")
    if not args.timeout > 0:
        raise UserError(f"--timeout must be positive, got {args.timeout}")
    out = {"frames": args.openai_frames, "frame_times": args.openai_frame_times, "tool_protocol": args.openai_tools,
           "extras": args.openai_extras, "share_initial": args.openai_share, "return_token_ids": args.openai_token_ids,
           "concurrency": args.concurrency, "timeout": args.timeout, "retries": args.retries, "api_key_env": args.api_key_env,
           "cache": args.out / CACHE_FILE}  # fmt: skip
    if args.from_run is not None:
        served = getattr(args, "served_record", None) or {}
        out |= {"replay": [args.from_run / CACHE_FILE], "offline": True}
        if served.get("model"):
            out["model"] = served["model"]
    return out


def rerun_failed_episodes(run_dir: Path) -> int:
    """Drop every failed episode from RUN/trajectories.jsonl, so that this run plays its sample again
    (`run_rollouts` resumes a sample unless all of its episodes are written; a served policy answers
    its other episodes from the run's response cache); the number dropped."""
    from videoseek.envs.trajectory import TrajectoryWriter

    path = run_dir / "trajectories.jsonl"
    if not path.is_file():
        return 0
    failed: set[str] = set()
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
                if row.get("failure"):
                    failed.add(row["episode_id"])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a line cut by a kill: the writer drops it
    if failed:
        TrajectoryWriter(run_dir).drop(failed)
    return len(failed)


# Scripted policies that answer without calling a tool, so that --no-tools measures them as they are.
NO_TOOL_SCRIPTED = ("no-tool",)


def no_tool_overrides(args: argparse.Namespace) -> dict:
    """EnvConfig fields of --frames, --tools and --no-tools: ``initial_frames`` (and a
    ``max_total_frames`` that holds them), ``tools`` as listed, and for --no-tools ``tools=False``
    with one turn. UserError for a scripted policy that calls tools (its no-tool run would only
    show refused calls), a --max-turns above 1 with --no-tools, or --tools with --no-tools."""
    from videoseek.envs.errors import UserError

    out: dict = {}
    if args.frames is not None:
        if args.frames < 1:
            raise UserError(f"--frames must be at least 1, got {args.frames}")
        out["initial_frames"] = args.frames
        out["max_total_frames"] = max(args.frames, 64)
    if args.tools is not None:
        if args.no_tools:
            raise UserError("--tools and --no-tools contradict each other; --no-tools is the run without tools")
        from videoseek.envs.tools import resolve_tools

        out["tools"] = [t.strip() for t in args.tools.split(",") if t.strip()]
        try:
            resolve_tools(out["tools"])
        except ValueError as exc:  # "unknown tool 'x'; registered tools: ..."
            raise UserError(f"--tools: {exc}") from None
    if args.no_tools:
        if ":" not in args.policy and args.policy not in NO_TOOL_SCRIPTED:
            raise UserError(f"--no-tools: policy {args.policy!r} crops by design; use hf:PATH, vllm:PATH or {', '.join(NO_TOOL_SCRIPTED)}")
        if args.max_turns not in (None, 1):
            raise UserError(f"--no-tools plays one turn; drop --max-turns {args.max_turns}")
        out |= {"tools": False, "max_turns": 1}
    return out


def precheck_videos(rows: list, data: Path, backend: str, *, skip_bad: bool = False) -> list:
    """The samples of `rows` ((line, VideoSample) pairs) whose videos are usable.

    Each distinct video is opened once (the reader stays in the shared pool for the episodes),
    its metadata read and its last frame decoded: cheap, and it catches missing, empty, truncated
    and non-video files. A row whose annotations lie past the real end is bad too. Raises
    UserError after listing the bad rows on stderr, or with `skip_bad` warns and drops them.
    A declared duration the video disagrees with is a warning (the env uses the video's).
    """
    import warnings

    from videoseek.envs.errors import UserError
    from videoseek.envs.sample import DataError
    from videoseek.envs.video import DurationMismatchWarning, check_video, reconcile_duration

    infos: dict[str, object] = {}
    problems: list[str] = []
    kept = []
    kind, note = ("warning", " (row skipped)") if skip_bad else ("error", "")
    for lineno, sample in rows:
        where = f"{data}:{lineno} (sample {sample.id})"
        if sample.video not in infos:
            try:
                infos[sample.video] = check_video(sample.video, backend)
            except DataError as exc:
                infos[sample.video] = exc
        info = infos[sample.video]
        problem = None
        if isinstance(info, DataError):
            problem = f"{where}: field 'video': {info}"
        else:
            try:
                sample.check_within(info.duration)
            except ValueError as exc:  # "clue_intervals.0: end 31 is beyond the video duration 20 s"
                problem = f"{where}: {exc} ({sample.video})"
        if problem is not None:
            problems.append(problem)
            print(f"videoseek rollout: {kind}: {problem}{note}", file=sys.stderr)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DurationMismatchWarning)
            reconcile_duration(sample.video, sample.duration, info.duration, where=where)
        for w in caught:  # once per video: the envs of this file will not warn again
            print(f"videoseek rollout: warning: {w.message}", file=sys.stderr)
        kept.append(sample)
    if problems and not skip_bad:
        raise UserError(f"{len(problems)} of {len(rows)} rows cannot run (listed above); fix them or pass --skip-bad")
    if problems and not kept:
        raise UserError(f"{data}: no usable rows left after --skip-bad")
    return kept
