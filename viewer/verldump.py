"""verl's generation dumps as trajectories, so a verl (GPU) training run is viewed like a local one.

verl 0.9.1 writes one JSONL file per step with `trainer.rollout_data_dir` (training rollouts) and
`trainer.validation_data_dir` (validation), named `<global_step>.jsonl`; `run_csgrpo.py --backend
verl` points them at `RUN/rollouts/` and `RUN/probes/`. Each line is one response:

    {"input": decoded prompt, "output": decoded response, "gts": ground truth, "score": reward,
     "step": global step, <every reward extra key>: value, ...}

(`RayTrainer._write_generations`). What the extra keys are depends on the trainer:

- the legacy trainer (`trainer.use_v1=false`) and every validation dump: all the keys our
  `compute_score` returned (`training/verl_plugin/reward_fn.py`), among them `videoseek_episode`, the sample
  and the agent loop's record (episode summary with every assistant turn, the spans and regions of
  the accepted calls, the accepted calls per tool, final evidence, reward and components, failure)
  as a JSON string. From that a full trajectory is rebuilt: each assistant turn parsed by the env's
  own parser, each tool call matched to the record, accepted spans replayed on the env's
  `EvidenceState` (so gains, duplicates and fragments are what the env computed), the reward
  components as recorded. What the dump does not hold is said on the page: the tool's answers
  (text and frames) and the advantage.
- the v1 trainer's training dump (`trainer.use_v1=true`, verl's default) writes only `uid` (the
  TransferQueue key). `VideoSeekAgentLoop` writes each episode it plays beside it,
  `rollout_data_dir/videoseek/<prompt step>.<host>-<pid>.jsonl` (`training/verl_plugin/episode_dump.py`),
  one line `{"key", "step", "acc", "videoseek_episode"}` per episode; a dump line is joined with
  the episode line of its `uid` and rebuilt as above. The prompt step is the dump's step, or an
  earlier one when the trainer trains off-policy: up to `LOOKBACK_STEPS` earlier steps are
  searched until every key is found. A line whose episode is not there (the episode dump was not written, or removed) is read
  from its decoded text: the turns, prediction and tool calls from the text, its group the uid's
  prompt part; the line says so.

Nothing here raises on the content of a file: a line that cannot be used becomes a line the run
index reports by file and line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from videoseek.viewer.rewardinfo import find_reward_config
from videoseek.viewer.runindex import SCHEMA_VERSION  # the trajectories written here are of this version

DUMP = re.compile(r"^(\d+)\.jsonl$")
VIEW_KEY = "videoseek_episode"  # training/verl_plugin/records.py VIEW_KEY
SIDECAR = "videoseek"  # training/verl_plugin/episode_dump.py FOLDER
# Prompt steps searched back from a dump's step: twice verl's default bound on how many weight
# versions a trajectory may span (`trainer.v1.sampler.max_off_policy_threshold: 8`), so a missing
# episode costs a bounded read, not the whole run's history.
LOOKBACK_STEPS = 16
NOT_IN_DUMP = "(the tool's answer is not in verl's dump)"
_BETWEEN = re.compile(r"\nuser\n(.*?)\nassistant\n", re.DOTALL)
TEXT_ONLY = ("verl's v1 training dump (trainer.use_v1=true) holds the decoded prompt and response, the ground truth and the score only: "
             "the turns are read from the text; evidence, reward components, frames and the sample's clue intervals are not in it")
_USER = re.compile(r"(?:^|\n)user\n(.*?)(?:\nassistant\n|$)", re.DOTALL)


def dump_files(root: Path, kind: str) -> dict[int, Path]:
    """{step: file} of verl's dumps `root/kind/<step>.jsonl` (kind: rollouts or probes)."""
    base = root / kind
    try:
        entries = list(base.iterdir()) if base.is_dir() else []
    except OSError:
        return {}
    out = {int(m.group(1)): e for e in entries if (m := DUMP.match(e.name)) and e.is_file()}
    return dict(sorted(out.items()))


def episode_dump_files(dump_dir: Path) -> dict[int, list[Path]]:
    """{prompt step: [files]} of the agent loop's episode dump beside verl's dumps in `dump_dir`."""
    from videoseek.envs.trajectory import episode_dump_files as listing

    return listing(dump_dir / SIDECAR)


def episode_dump_stamp(files: dict[int, list[Path]], step: int) -> tuple:
    """What `convert_dump` read of the episode dump for `step` (names, sizes, times of its files in
    `files`, `episode_dump_files`' listing): it is converted again when that changes."""
    stamp = []
    for f in files.get(step, []):
        try:
            st = f.stat()
        except OSError:
            continue
        stamp.append((f.name, st.st_size, st.st_mtime_ns))
    return tuple(stamp)


def episode_lines(dump_dir: Path, step: int, keys: set[str], groups: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """{key: episode line} of the agent loop's episode dump for the dump lines' `keys`, and the
    perturbed episodes of the prompt uids `groups` (lines with that `group_key`): the files of
    prompt step `step` first, then earlier ones (an off-policy trainer dumps older prompts' episodes),
    at most `LOOKBACK_STEPS` back, until every key is found. Lines that are not JSON objects with a
    key are passed over."""
    found: dict[str, dict[str, Any]] = {}
    origin_found = 0
    files = episode_dump_files(dump_dir)
    for s in sorted((k for k in files if step - LOOKBACK_STEPS <= k <= step), reverse=True):
        for f in files[s]:
            try:
                data = f.read_bytes()
            except OSError:
                continue
            for raw in data.split(b"\n"):
                try:
                    line = json.loads(raw) if raw.strip() else None
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue  # a torn last line of an episode still being written
                if not isinstance(line, dict) or not isinstance(line.get("key"), str):
                    continue
                if line["key"] in keys:
                    origin_found += line["key"] not in found
                    found[line["key"]] = line
                elif line.get("group_key") in groups:
                    found[line["key"]] = line
        if origin_found == len(keys):
            break
    return found


def _from_trajectory(entry: dict[str, Any], group: str, score: float | None, source: str) -> bytes | None:
    """The env's own trajectory from an episode line (typed: `Trajectory`), grouped by its prompt
    uid and, for an origin episode, with the reward verl's dump recorded; None if it does not validate."""
    from videoseek.envs.trajectory import Trajectory

    try:
        traj = Trajectory.model_validate(entry["trajectory"])
    except (ValueError, TypeError):
        return None
    traj.episode_id = f"{group}/{traj.episode_id}"  # a sample can be drawn twice in one step
    traj.group.id = group
    traj.policy = traj.policy or "verl"
    if score is not None and traj.group.role == "origin":
        traj.reward = score
    traj.metrics["verl"] = {"source": source, "ended_by": traj.metrics.get("ended_by")}
    return traj.model_dump_json().encode("utf-8")


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _question(prompt: str) -> str:
    """The user's text of a decoded chat prompt (special tokens already dropped by verl)."""
    found = _USER.findall(prompt or "")
    return found[-1].strip() if found else (prompt or "").strip()


def _group_of_uid(uid: str) -> tuple[str, int]:
    """verl's v1 uid `<prompt uid>_<rollout>_<output>` -> (prompt uid, rollout index)."""
    parts = uid.rsplit("_", 2)
    if len(parts) == 3 and parts[1].isdigit():
        return parts[0], int(parts[1])
    return uid, 0


def _number(value: Any) -> float | None:
    return _float(value) if not isinstance(value, str) else None


def _span_of(arguments: dict[str, Any]) -> tuple[float, float] | None:
    """(start, end) of a call whose arguments name a time span (numbers), else None."""
    s, e = _number(arguments.get("start")), _number(arguments.get("end"))
    return None if s is None or e is None else (s, e)


def _box_of(arguments: dict[str, Any]) -> list[float] | None:
    """The box of a call whose arguments hold one (4 numbers), clipped to the frame as the env clips it; else None."""
    box = arguments.get("box")
    if not isinstance(box, (list, tuple)) or len(box) != 4 or any(_number(v) is None for v in box):
        return None
    return [min(max(float(v), 0.0), 1.0) for v in box]


def _same(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(abs(float(x) - float(y)) < 1e-6 for x, y in zip(a, b))


def _turns_from_record(sample: dict[str, Any], record: dict[str, Any], reward: Any = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The episode's turns: each assistant turn parsed by the env's parser, each tool call matched to
    what the record says was accepted. Returns (turns, notes).

    The record keeps the accepted calls' evidence, not a list of calls: the spans of span-retrieving
    calls (`calls`, replayed on the env's evidence state, so gains, duplicates and fragments are
    the env's), the (time, box) of region looks (`zooms`, scored against the key frames as the env
    scores them) and the accepted calls per tool (`tool_calls`). A call is matched by what its
    arguments say (a span, a box) to the next recorded span or region; a call of a tool that
    leaves neither is accepted while its tool's count lasts. The evidence thresholds are those of the
    record's reward config (the agent loop records it), else `reward` (the run record's), else the
    defaults.
    """
    from videoseek.envs.actions import ToolCall, CropVideo, action_to_dict, parse_action
    from videoseek.envs.evidence import episode_evidence
    from videoseek.rewards import RewardConfig

    episode = record.get("episode") if isinstance(record.get("episode"), dict) else {}
    texts = [t for t in episode.get("assistant_turns") or [] if isinstance(t, str)]
    spans = [c for c in episode.get("calls") or [] if isinstance(c, (list, tuple)) and len(c) == 2]
    zooms = [z for z in episode.get("zooms") or [] if isinstance(z, (list, tuple)) and len(z) == 2 and isinstance(z[1], (list, tuple))]
    frames = [[t for t in f if _float(t) is not None] if isinstance(f, (list, tuple)) else None for f in episode.get("call_frames") or []]
    counts = {str(k): int(v) for k, v in (record.get("tool_calls") or {}).items() if isinstance(v, (int, float))}
    duration = _float(episode.get("duration")) or _float(sample.get("duration")) or 0.0
    key_frames = [k for k in sample.get("key_frames") or [] if isinstance(k, dict)]
    try:
        reward = RewardConfig.model_validate(record["reward_config"]) if isinstance(record.get("reward_config"), dict) else reward
    except ValueError:  # a record of another version: the run's config, else the defaults
        pass
    state = episode_evidence([tuple(c) for c in sample.get("clue_intervals") or []], duration, reward or RewardConfig(), key_frames=key_frames)
    notes: list[str] = []
    turns: list[dict[str, Any]] = []
    k = z = 0  # next recorded span, next recorded region
    call_of_span: list[int] = []  # the call index of each replayed span (duplicates name calls)
    used: dict[str, int] = {}
    for index, text in enumerate(texts):
        parsed = parse_action(text)
        act = parsed.action
        call, error = None, None
        if isinstance(act, (ToolCall, CropVideo)):
            args = dict(act.arguments)
            span, box = _span_of(args), _box_of(args)
            n_calls = sum(t["call"] is not None for t in turns)
            base = {"index": n_calls, "tool": act.name, "arguments": args, "requested": args, "clipped": False}
            if span is not None:
                want = (min(max(span[0], 0.0), duration), min(max(span[1], 0.0), duration))
                if k < len(spans) and _same(want, spans[k]):
                    shown = frames[k] if k < len(frames) else None  # the frame times, where the record has them
                    ev = state.add(float(spans[k][0]), float(spans[k][1]), frame_times=shown)
                    k += 1
                    call_of_span.append(n_calls)
                    call = {**base, "arguments": {**args, "start": ev.start, "end": ev.end}, "clipped": (ev.start, ev.end) != span,
                            "start": ev.start, "end": ev.end, "gain": ev.gain,
                            "duplicate_of": None if ev.duplicate_of is None else call_of_span[ev.duplicate_of],
                            "fragment": ev.adjacent_to_previous, "best_prior_tiou": ev.best_prior_tiou}  # fmt: skip
            elif box is not None:
                if z < len(zooms) and len(zooms[z][1]) == 4 and _same(box, zooms[z][1]) and _float(zooms[z][0]) is not None:
                    t = float(zooms[z][0])
                    z += 1
                    call = {**base, "arguments": {**args, "box": box}, "clipped": box != [float(v) for v in args["box"]],
                            "time": t, "box": box, "box_iou": state.add_region(t, box)}  # fmt: skip
            elif used.get(act.name, 0) < counts.get(act.name, 0):
                call = base
            if call is not None:
                used[act.name] = used.get(act.name, 0) + 1
            else:
                error = "rejected by the env (the reason is not in verl's dump)"
        turns.append({
            "index": index, "assistant": text, "action": action_to_dict(act), "think": parsed.think, "repairs": parsed.repairs,
            "dialect": parsed.dialect, "error": error, "observation": {"text": NOT_IN_DUMP, "frames": []},
            "evidence": {**state.snapshot(), "gain": call.get("gain") if call else None}, "call": call,
        })  # fmt: skip
    if k < len(spans):
        notes.append(f"{len(spans) - k} of the record's {len(spans)} spans match no assistant turn")
    if z < len(zooms):
        notes.append(f"{len(zooms) - z} of the record's {len(zooms)} zoomed regions match no assistant turn")
    return turns, notes


def _from_view(line: dict[str, Any], view: dict[str, Any], step: int, n: int, source: str, reward: Any = None) -> dict[str, Any]:
    """A trajectory from a line that carries `videoseek_episode` (compute_score's JSON), or from a
    v1 dump line joined with the agent loop's episode line (`source` says which)."""
    sample = view.get("sample") if isinstance(view.get("sample"), dict) else {}
    record = view.get("record") if isinstance(view.get("record"), dict) else {}
    episode = record.get("episode") if isinstance(record.get("episode"), dict) else {}
    turns, notes = _turns_from_record(sample, record, reward)
    prediction = episode.get("prediction")
    acc = _float(line.get("acc"))
    metadata = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
    sample_id = str(sample.get("id") or record.get("sample_id") or "")
    components = {k: v for k, v in (record.get("reward_components") or {}).items() if _float(v) is not None}
    uid = line.get("uid") if isinstance(line.get("uid"), str) else None
    group, gindex = _group_of_uid(uid) if uid else (f"step{step}:{sample_id}", n)
    return {
        "schema_version": SCHEMA_VERSION, "episode_id": f"{sample_id}/step{step}/{uid or n}", "sample_id": sample_id, "policy": "verl",
        "group": {"id": group, "index": gindex, "role": "origin"}, "question": str(sample.get("question") or ""), "options": sample.get("options"),
        "answer": str(sample.get("answer") or line.get("gts") or ""), "problem_type": str(sample.get("problem_type") or ""),
        "duration": _float(episode.get("duration")) or _float(sample.get("duration")) or 0.0,
        "clue_intervals": sample.get("clue_intervals") or [], "key_frames": sample.get("key_frames") or [],
        "data_source": str(sample.get("data_source") or ""), "task_kind": metadata.get("task_kind"), "video": str(sample.get("video") or ""),
        "initial": {"text": NOT_IN_DUMP, "frames": []}, "turns": turns, "prediction": prediction,
        "correct": None if acc is None else acc >= 1.0, "accuracy": acc, "reward": _float(line.get("score")) or 0.0,
        "reward_components": components, "advantage": None, "terminated": record.get("ended_by") == "env" and not episode.get("truncated"),
        "truncated": bool(episode.get("truncated")), "failure": record.get("failure") or None,
        "metrics": {"verl": {"source": source, "group_reward": record.get("group_reward"), "ended_by": record.get("ended_by"), "notes": notes}},
    }  # fmt: skip


def _split_turns(output: str) -> list[tuple[str, str | None]]:
    """A decoded multi-turn response as [(assistant text, the tool's answer after it or None)].

    verl decodes with `skip_special_tokens=True`, so Qwen's `<|im_end|>\n<|im_start|>user\n ...
    <|im_end|>\n<|im_start|>assistant\n` between turns is left as `\nuser\n ... \nassistant\n`."""
    parts = _BETWEEN.split(output)
    out = []
    for k in range(0, len(parts), 2):
        tool = parts[k + 1] if k + 1 < len(parts) else None
        if tool is not None:
            tool = re.sub(r"^\s*<tool_response>\s*|\s*</tool_response>\s*$", "", tool)
        out.append((parts[k], tool))
    return out


def _from_text(line: dict[str, Any], step: int, n: int) -> dict[str, Any]:
    """A trajectory from the decoded text alone (v1 training dumps: input, output, gts, score, uid)."""
    from videoseek.envs.actions import Answer, CropVideo, ToolCall, action_to_dict, parse_action

    output = line.get("output") if isinstance(line.get("output"), str) else ""
    uid = line.get("uid") if isinstance(line.get("uid"), str) else ""
    group, gindex = _group_of_uid(uid) if uid else (f"step{step}", n)
    gts = line.get("gts")
    answer = gts if isinstance(gts, str) else json.dumps(gts) if gts is not None else ""
    turns, prediction, ends = [], None, [1.0]
    for index, (text, tool) in enumerate(_split_turns(output)):
        parsed = parse_action(text)
        act = parsed.action
        error = tool[len("Error: "):].split(". Call the tool as")[0] if tool and tool.startswith("Error: ") else None
        call = None
        if isinstance(act, (ToolCall, CropVideo)) and error is None and tool is not None:
            # accepted (the tool answered without an error); what it read is in its answer's text only
            args = dict(act.arguments)
            call = {"index": sum(t["call"] is not None for t in turns), "tool": act.name, "arguments": args, "requested": args, "clipped": False}
            span, box, t = _span_of(args), _box_of(args), _number(args.get("time"))
            if span is not None:
                call.update(start=span[0], end=span[1], gain=None)
                ends.append(span[1])
            elif box is not None and t is not None:
                call.update(time=t, box=box)
                ends.append(t)
        if isinstance(act, Answer):
            prediction = act.text
        turns.append({
            "index": index, "assistant": text, "action": action_to_dict(act), "think": parsed.think, "repairs": parsed.repairs,
            "dialect": parsed.dialect, "error": error, "call": call, "evidence": {"coverage": None, "precision": None, "score": None},
            "observation": {"text": tool if tool is not None else "", "frames": []},
        })  # fmt: skip
    prompt = line.get("input") if isinstance(line.get("input"), str) else ""
    return {
        "schema_version": SCHEMA_VERSION, "episode_id": f"step{step}/{uid or n}", "sample_id": group, "policy": "verl",
        "group": {"id": group, "index": gindex, "role": "origin"}, "question": _question(prompt), "answer": answer, "problem_type": "",
        "duration": max(ends), "video": "", "initial": {"text": prompt, "frames": []}, "turns": turns, "prediction": prediction,
        "correct": None if prediction is None or not answer else prediction.strip().upper() == answer.strip().upper(),
        "reward": _float(line.get("score")) or 0.0, "reward_components": {}, "advantage": None, "terminated": prediction is not None,
        "metrics": {"verl": {"source": "decoded text", "note": TEXT_ONLY}},
    }  # fmt: skip


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        line = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return line if isinstance(line, dict) else None


def convert_line(raw: bytes, line: dict[str, Any] | None, step: int, n: int, episodes: dict[str, dict[str, Any]], reward: Any = None) -> bytes:
    """One dump line (`raw`, parsed as `line`) as one trajectory line, joined with its episode line
    from `episodes` ({key: line}, `episode_lines`) when it carries no episode itself; a line that is
    not a usable JSON object is passed on unchanged, or replaced by an object that names its
    problem, so the run index reports it. `reward`: the run's `RewardConfig` (its run record), for
    records that do not hold one."""
    if line is None:
        return raw  # the index reports "invalid JSON" (or a truncated last line) with this line number
    source = VIEW_KEY
    uid = line.get("uid")
    episode = episodes.get(uid) if isinstance(uid, str) and VIEW_KEY not in line else None
    if episode is not None:
        source = f"the agent loop's episode dump ({SIDECAR}/)"
        if isinstance(episode.get("trajectory"), dict):
            traj = _from_trajectory(episode, _group_of_uid(uid)[0], _float(line.get("score")), source)
            if traj is not None:
                return traj
        line = {**line, "acc": episode.get("acc"), VIEW_KEY: episode.get(VIEW_KEY)}
    view = line.get(VIEW_KEY)
    if isinstance(view, str):
        try:
            view = json.loads(view)
        except json.JSONDecodeError as exc:
            return json.dumps({"episode_id": f"step{step}/line-{n + 1}", "_problem": f"line {n + 1}: {VIEW_KEY} is not JSON ({exc.msg})"}).encode()
    if isinstance(view, dict) and isinstance(view.get("record"), dict):
        out = _from_view(line, view, step, n, source, reward)
    elif "output" in line:
        out = _from_text(line, step, n)
        sample = view.get("sample") if isinstance(view, dict) else None
        if isinstance(sample, dict):  # a row that did not come from the agent loop: its sample, its text
            out.update({k: sample[k] for k in ("question", "options", "answer", "problem_type", "clue_intervals", "video", "duration") if sample.get(k) is not None})
            out["sample_id"] = str(sample.get("id") or out["sample_id"])
    else:
        return json.dumps({"episode_id": f"step{step}/line-{n + 1}", "_problem": f"line {n + 1}: not a verl dump line (no 'output')"}).encode()
    return json.dumps(out, ensure_ascii=False).encode("utf-8")


def convert_dump(src: Path, dest_dir: Path, step: int) -> None:
    """Write `dest_dir/trajectories.jsonl` from verl's dump `src`, one line for each of its lines,
    each joined with its episode from the agent loop's episode dump where it carries none."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    data = src.read_bytes()
    lines = data.split(b"\n")
    # an unfinished last line stays as it is (the index reports it); every other line is parsed once
    parsed = [_parse(raw) if raw.strip() and n < len(lines) - 1 else None for n, raw in enumerate(lines)]
    wanted = {uid for line in parsed if line and VIEW_KEY not in line and isinstance(uid := line.get("uid"), str)}
    groups = frozenset(_group_of_uid(uid)[0] for uid in wanted)
    episodes = episode_lines(src.parent, step, wanted, groups) if wanted else {}
    reward = find_reward_config(src.parent)[0]  # the run record above verl's rollout_data_dir
    out = []
    for n, (raw, line) in enumerate(zip(lines, parsed)):
        if not raw.strip():
            out.append(b"")
            continue
        out.append(raw if n == len(lines) - 1 else convert_line(raw, line, step, n, episodes, reward))
    # The perturbed episodes of these prompts (only the agent loop's dump has them), after verl's
    # lines and before the last piece (the file's final line end, or a line still being written).
    tail = out.pop()
    for entry in episodes.values():
        if entry.get("group_key") in groups and isinstance(entry.get("trajectory"), dict):
            traj = _from_trajectory(entry, entry["group_key"], None, f"the agent loop's episode dump ({SIDECAR}/)")
            if traj is not None:
                out.append(traj)
    out.append(tail)
    tmp = dest_dir / "trajectories.jsonl.tmp"
    tmp.write_bytes(b"\n".join(out))
    os.replace(tmp, dest_dir / "trajectories.jsonl")
