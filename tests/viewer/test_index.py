"""The viewer's run index (byte offsets, growth, bad lines) and the episode view model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from videoseek.envs.trajectory import Trajectory
from videoseek.viewer.episode import call_label, call_records, episode_view, masked_ranges, segments
from videoseek.viewer.fixtures import write_fixture_run
from videoseek.viewer.paths import UnsafePath, decode_relative, resolve_inside
from videoseek.viewer.runindex import EpisodeQuery, RunIndex, facets, select


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run")
    write_fixture_run(run, n_samples=3, group_size=4)
    return run


def lines_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]


def test_fixture_lines_are_valid_trajectories(fixture_run):
    for raw in lines_of(fixture_run):
        assert raw["schema_version"] == 2
        assert {t["action"]["type"] for t in raw["turns"]} <= {"tool_call", "answer", "think", "invalid"}
        Trajectory.model_validate(raw)


def test_index_rows_match_the_file(fixture_run):
    index = RunIndex(fixture_run)
    index.refresh()
    rows = index.rows()
    raws = lines_of(fixture_run)
    assert len(rows) == len(raws) == 24
    for row, raw in zip(rows, raws):
        assert row.episode_id == raw["episode_id"]
        assert row.correct == raw["correct"]
        assert row.reward == raw["reward"]
        assert row.calls == sum(t["call"] is not None for t in raw["turns"])
        assert row.role == raw["group"]["role"]
        assert row.problem is None
        full, problem = index.read(row)
        assert problem is None and full == raw  # the byte offsets point at the right line


def test_filters_sort_and_pages(fixture_run):
    index = RunIndex(fixture_run)
    index.refresh()
    rows = index.rows()
    raws = lines_of(fixture_run)
    total, page = select(rows, EpisodeQuery(outcome="wrong", per_page=100))
    assert total == sum(r["correct"] is False for r in raws) and all(r.correct is False for r in page)
    total, page = select(rows, EpisodeQuery(role="perturbed", task_kind="speed", per_page=100))
    assert total == sum(r["group"]["role"] == "perturbed" and r["task_kind"] == "speed" for r in raws)
    total, page = select(rows, EpisodeQuery(reward_min=2.0, reward_max=2.4, per_page=100))
    assert {r.reward for r in page} == {r["reward"] for r in raws if 2.0 <= r["reward"] <= 2.4}
    total, page = select(rows, EpisodeQuery(text="S00001/MASK", per_page=100))
    assert [r.episode_id for r in page] == [r["episode_id"] for r in raws if "s00001/mask" in r["episode_id"]]
    _, page = select(rows, EpisodeQuery(sort="advantage", descending=True, per_page=100))
    advantages = [r.advantage for r in page]
    present = [a for a in advantages if a is not None]
    assert present == sorted(present, reverse=True) and advantages[len(present):] == [None] * (len(advantages) - len(present))
    total, page = select(rows, EpisodeQuery(per_page=5, page=4))
    assert total == 24 and [r.index for r in page] == [20, 21, 22, 23]
    f = facets(rows)
    assert f["role"] == {"origin": 12, "perturbed": 12} and f["outcome"]["wrong"] == 6


def test_bad_lines_become_rows_with_problems(tmp_path):
    run = tmp_path / "run"
    write_fixture_run(run, n_samples=1, group_size=2, perturbed=False)
    path = run / "trajectories.jsonl"
    good = path.read_text().splitlines()
    other = json.loads(good[1])
    other["schema_version"], other["episode_id"] = 7, "s00000/v7"
    path.write_text("\n".join([good[0], "{not json", json.dumps(other), "[1, 2]", good[0]]) + "\n" + good[1][:40])
    index = RunIndex(run)
    index.refresh()
    rows = index.rows()
    assert [r.problem is None for r in rows] == [True, False, False, False, False, False]
    assert rows[1].problem.startswith("line 2: invalid JSON")
    assert "unknown schema_version 7" in rows[2].problem
    assert "expected a JSON object" in rows[3].problem
    assert "duplicate episode_id" in rows[4].problem
    assert "truncated last line" in rows[5].problem
    assert index.read(rows[5]) == (None, rows[5].problem)
    # the writer finishes the line: it becomes a normal row, nothing is indexed twice
    with path.open("a") as fh:
        fh.write(good[1][40:] + "\n")
    index.refresh()
    rows = index.rows()
    assert len(rows) == 6 and rows[5].problem is None and rows[5].episode_id == json.loads(good[1])["episode_id"]
    assert index.read(rows[5])[0] == json.loads(good[1])


def test_index_grows_and_rebuilds(tmp_path):
    run = tmp_path / "run"
    index = RunIndex(run)
    index.refresh()
    assert index.rows() == [] and "not found" in index.status
    run.mkdir()
    (run / "trajectories.jsonl").write_text("")
    index.refresh()
    assert index.rows() == [] and "empty" in index.status
    write_fixture_run(run, n_samples=1, group_size=2, perturbed=False)  # replaces the file
    index.refresh()
    assert len(index.rows()) == 2 and index.status == ""
    extra = (run / "trajectories.jsonl").read_text()
    with (run / "trajectories.jsonl").open("a") as fh:
        fh.write("\n" + extra.replace('"s00000/g', '"s00000/h'))
    index.refresh()
    assert [r.episode_id for r in index.rows()] == ["s00000/g0", "s00000/g1", "s00000/h0", "s00000/h1"]


def test_ten_thousand_episodes_page_lazily(tmp_path):
    run = tmp_path / "big"
    write_fixture_run(run, n_samples=1, group_size=4, perturbed=False, write_frames=False)
    base = [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]
    with (run / "trajectories.jsonl").open("w") as fh:
        for k in range(10_000):
            ep = dict(base[k % 4], episode_id=f"e{k:05d}", reward=float(k % 97))
            fh.write(json.dumps(ep) + "\n")
    index = RunIndex(run)
    index.refresh()
    rows = index.rows()
    assert len(rows) == 10_000
    # 103 episodes have the top reward 96 (k % 97 == 96): page 1 holds the 51st to 100th, in file order
    total, page = select(rows, EpisodeQuery(sort="reward", descending=True, page=1, per_page=50))
    assert total == 10_000 and [r.index for r in page] == [k for k in range(10_000) if k % 97 == 96][50:100]
    assert index.read(rows[9_999])[0]["episode_id"] == "e09999"


def test_episode_view_of_fixture(fixture_run):
    index = RunIndex(fixture_run)
    index.refresh()
    raws = lines_of(fixture_run)
    by_id = {r.episode_id: r for r in index.rows()}
    view = episode_view(raws[1], index.root, lambda p: "/f/" + p)  # g1: rejected call, off-target call
    assert view["issues"] == []
    assert [(c["n"], c["rejected"]) for c in view["calls"]] == [(1, True), (2, False)]
    assert view["calls"][0]["reason"].startswith("crop_video needs start < end")
    assert (view["calls"][0]["start"], view["calls"][0]["end"]) == (12.0, 3.0)  # where the rejected call asked to look
    assert view["calls"][1]["gain"] == raws[1]["turns"][1]["call"]["gain"]
    assert [c["tool"] for c in view["calls"]] == ["crop_video", "crop_video"]
    s, e = raws[1]["turns"][1]["call"]["start"], raws[1]["turns"][1]["call"]["end"]
    assert view["calls"][0]["label"] == "crop_video(start=12, end=3)" and view["calls"][1]["label"] == f"crop_video(start={s:g}, end={e:g})"
    assert view["calls"][1]["box"] is None and view["calls"][1]["times"] == [f["t"] for f in raws[1]["turns"][1]["observation"]["frames"]]
    assert all(f["url"] == "/f/" + f["path"] for t in view["turns"] for f in t["observation"]["frames"])
    dup = episode_view(raws[2], index.root, str)
    assert [c["duplicate_of"] for c in dup["calls"]] == [None, 0] and dup["calls"][1]["duplicate_of_n"] == 1
    frag = episode_view(raws[3], index.root, str)
    assert frag["calls"][0]["rejected"] and frag["calls"][0]["start"] is None  # malformed call: no span
    assert frag["calls"][0]["tool"] == "" and frag["calls"][0]["label"] == "invalid call"
    assert [c["fragment"] for c in frag["calls"][1:]] == [False, True]
    masked = episode_view(raws[by_id["s00000/mask/g0"].index], index.root, str)
    assert masked["masked_ranges"] == [raws[0]["clue_intervals"][0]]
    assert [p["turn"] for p in view["evidence_curve"]] == [0, 1, 2]


def test_episode_view_reports_problems(fixture_run, tmp_path):
    raw = lines_of(fixture_run)[0]
    raw["schema_version"] = 3
    raw["turns"][0]["observation"]["frames"][0]["path"] = "frames/nope.jpg"
    raw["turns"][0]["observation"]["frames"][1]["path"] = "../../etc/passwd"
    raw["turns"][0]["observation"]["frames"][2]["path"] = 5
    view = episode_view(raw, fixture_run, str)
    text = "\n".join(view["issues"])
    assert "unknown schema_version 3 (this viewer reads 1 and 2)" in text
    assert "frame file missing: frames/nope.jpg" in text
    assert "'../../etc/passwd' refused" in text
    assert "frame path is not a string" in text
    frames = view["turns"][0]["observation"]["frames"]
    assert [f["missing"] for f in frames[:3]] == ["file missing", "path outside the run", "path is not a string"]
    assert all(f["url"] is None for f in frames[:3])
    assert episode_view("oops", fixture_run, str)["issues"] == ["expected a JSON object, got str"]
    broken = episode_view({"turns": "x", "clue_intervals": [[3, 1]]}, fixture_run, str)
    assert any("'turns' should be a list" in m for m in broken["issues"]) and any("clue_intervals [0]" in m for m in broken["issues"])


def test_version_1_files_open_as_they_did(fixture_run, tmp_path):
    """A run written before tool calls had names (schema 1: crop actions with start/end, `requested`
    as a pair) is indexed and drawn like the same run written as schema 2."""
    old = tmp_path / "v1"
    write_fixture_run(old, n_samples=3, group_size=4, schema_version=1)
    raws_v1, raws_v2 = lines_of(old), lines_of(fixture_run)
    assert {r["schema_version"] for r in raws_v1} == {1}
    assert raws_v1[0]["turns"][0]["action"] == {"type": "crop_video", "start": 5.0, "end": 11.0}
    assert raws_v1[0]["turns"][0]["call"]["requested"] == [5.0, 11.0] and "tool" not in raws_v1[0]["turns"][0]["call"]
    index = RunIndex(old)
    index.refresh()
    assert all(r.problem is None for r in index.rows())
    assert [r.calls for r in index.rows()] == [sum(t["call"] is not None for t in raw["turns"]) for raw in raws_v2]
    for v1, v2 in zip(raws_v1, raws_v2):
        a, b = episode_view(v1, old, str), episode_view(v2, fixture_run, str)
        assert a["issues"] == [] and a["calls"] == b["calls"] and a["axis_end"] == b["axis_end"]
        assert Trajectory.model_validate(v1).turns[0].action == Trajectory.model_validate(v2).turns[0].action  # the env's reader upgrades it


def test_call_records_of_any_tool():
    """What the page draws for each kind of call, from what the call returned (raw schema-2 turns)."""
    frames = lambda *ts: [{"t": t, "url": f"/f/{t}.jpg"} for t in ts]  # noqa: E731
    turns = [
        {"index": 0, "action": {"type": "tool_call", "name": "crop_video", "arguments": {"start": 4, "end": 9}},
         "call": {"index": 0, "tool": "crop_video", "arguments": {"start": 4.0, "end": 8.0}, "clipped": True, "start": 4.0, "end": 8.0, "gain": 0.3},
         "evidence": {"gain": 0.3}},
        {"index": 1, "action": {"type": "tool_call", "name": "zoom", "arguments": {"time": 6.4, "box": [0.5, 0.5, 1.2, 0.9]}},
         "call": {"index": 1, "tool": "zoom", "arguments": {"time": 6.4, "box": [0.5, 0.5, 1.0, 0.9]}, "clipped": True, "time": 6.5,
                  "box": [0.5, 0.5, 1.0, 0.9], "box_iou": 0.4, "gain": 0.0}},
        {"index": 2, "action": {"type": "tool_call", "name": "frame_at", "arguments": {"time": 7}},
         "call": {"index": 2, "tool": "frame_at", "arguments": {"time": 7}}},
        {"index": 3, "action": {"type": "tool_call", "name": "zoom", "arguments": {"time": 2, "box": [0.6, 0.1, 0.2, 0.3]}},
         "error": "zoom box needs x1 < x2 and y1 < y2, got [0.6, 0.1, 0.2, 0.3]"},
        {"index": 4, "action": {"type": "answer", "text": "B"}},
    ]
    calls = call_records(turns, [frames(4.5, 6.0, 7.5), frames(6.5), frames(7.0), [], []], frames(1.0, 7.2))
    crop, zoom, other, bad = calls
    assert [c["n"] for c in calls] == [1, 2, 3, 4] and [c["tool"] for c in calls] == ["crop_video", "zoom", "frame_at", "zoom"]
    assert (crop["start"], crop["end"], crop["gain"], crop["clipped"], crop["label"]) == (4.0, 8.0, 0.3, True, "crop_video(start=4, end=8)")
    assert (zoom["time"], zoom["box"], zoom["box_iou"], zoom["gain"], zoom["start"]) == (6.5, [0.5, 0.5, 1.0, 0.9], 0.4, None, None)
    assert zoom["label"] == "zoom(time=6.4, box=[0.5, 0.5, 1, 0.9])"  # the arguments as the tool read them (box clipped)
    # the box is drawn on the nearest whole frame: the crop's 6.0 s frame beats the initial 7.2 s one
    assert zoom["frame"] == {"t": 6.0, "url": "/f/6.0.jpg", "masked": False, "source": "turn 0", "dt": 0.5}
    assert (other["label"], other["times"], other["box"], other["start"]) == ("frame_at(time=7)", [7.0], None, None)
    assert bad["rejected"] and bad["reason"].startswith("zoom box needs") and bad["label"] == "zoom(time=2, box=[0.6, 0.1, 0.2, 0.3])"
    assert bad["time"] == 2.0 and bad["frame"] is not None  # where it would have looked
    # a zoom after a zoom: the first zoom's region is not a whole frame to draw on
    again = call_records(turns[:2] + [dict(turns[1], index=2)], [frames(4.5), frames(6.4), frames(6.4)], [])
    assert again[2]["frame"]["t"] == 4.5
    assert call_label("t", {"s": "x", "n": None, "f": 1 / 3, "deep": {"a": [1]}}) == 't(s="x", n=null, f=0.333, deep={"a": [1]})'


def test_segments_and_mask_ranges():
    text = 'I look.<think>where?</think>\n<tool_call>{"name": "crop_video"}</tool_call><answer>B'
    parts = segments(text)
    assert [p["kind"] for p in parts] == ["text", "think", "text", "tool_call", "answer"]
    assert "".join(p["text"] for p in parts) == text  # nothing dropped or duplicated
    assert segments("<retrieve>1, 2</retrieve>")[0]["kind"] == "tool_call"
    assert masked_ranges({"kind": "mask", "time_range": [3, 4], "pattern": 1}) == [[3.0, 4.0]]
    assert masked_ranges({"ranges": [[1, 2], [5, "x"]], "bad": [4, 1]}) == [[1.0, 2.0]]
    assert masked_ranges(None) == []


@pytest.mark.parametrize("path", ["..", "a/../../x", "%2e%2e/x", "a/%2E%2E/%2e%2e/x", "..%2fx", "%2fetc/passwd", "/etc/passwd",
                                  "a\\..\\x", "..%5cx", "x%00.jpg", "C:/x", ".", "a/./b", "", "%ff"])
def test_unsafe_paths_are_refused(tmp_path, path):
    with pytest.raises(UnsafePath):
        resolve_inside(tmp_path, path)


def test_safe_paths_and_symlinks(tmp_path):
    (tmp_path / "frames").mkdir()
    assert resolve_inside(tmp_path, "frames/a%20b.jpg") == (tmp_path / "frames" / "a b.jpg").resolve()
    assert decode_relative("%252e%252e/x") == ["%2e%2e", "x"]  # decoded once: a literal name, not a parent
    outside = tmp_path.parent / "outside.jpg"
    outside.write_bytes(b"x")
    (tmp_path / "frames" / "link.jpg").symlink_to(outside)
    with pytest.raises(UnsafePath):
        resolve_inside(tmp_path, "frames/link.jpg")
