"""The viewer server's JSON endpoints, file serving and path checks, play mode, export and CLI."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys

import pytest
from PIL import Image
from viewer_http import get_json, post_json, request
from videoseek.envs.sample import write_jsonl
from videoseek.envs.trajectory import Trajectory
from videoseek.viewer.export import export_runs
from videoseek.viewer.fixtures import write_compare_runs, write_fixture_run
from videoseek.viewer.play import PlayManager, find_samples_file
from videoseek.viewer.server import ViewerApp, serve_in_thread

from videoseek.cli import main


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A (fixture), run B (same episode ids, g0 answers flipped), a secret file beside them."""
    base = tmp_path_factory.mktemp("viewer")
    run_a, run_b = write_compare_runs(base)
    (base / "secret.jpg").write_bytes(b"SECRET-OUTSIDE")
    (base / "secret.txt").write_bytes(b"SECRET-OUTSIDE")
    (run_a / "frames" / "escape.jpg").symlink_to(base / "secret.jpg")
    return run_a, run_b, base


@pytest.fixture(scope="module")
def server(runs):
    run_a, run_b, _ = runs
    srv, thread = serve_in_thread(ViewerApp([run_a, run_b]))
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def test_runs_and_filtered_list(server, runs):
    info = get_json(server, "/api/runs")
    assert [r["key"] for r in info["runs"]] == ["A", "B"] and info["compare"] is True
    assert [r["episodes"] for r in info["runs"]] == [16, 8]
    page = get_json(server, "/api/episodes?run=A&outcome=wrong&role=origin")
    raws = [json.loads(x) for x in (runs[0] / "trajectories.jsonl").read_text().splitlines()]
    expected = [r["episode_id"] for r in raws if r["correct"] is False and r["group"]["role"] == "origin"]
    assert [r["episode_id"] for r in page["rows"]] == expected and page["total"] == len(expected)
    assert page["facets"]["policy"] == {"oracle": 16}
    page = get_json(server, "/api/episodes?run=A&sort=-reward&per_page=3&page=1")
    rewards = sorted((r["reward"] for r in raws), reverse=True)
    assert [r["reward"] for r in page["rows"]] == rewards[3:6]
    assert "unknown" in get_json(server, "/api/episodes?run=Z", 400)["error"]
    assert get_json(server, "/api/episodes?reward_min=abc", 400)["error"] == "reward_min: 'abc' is not a number"
    assert "sort" in get_json(server, "/api/episodes?sort=nope", 400)["error"]


def test_compare_filter_and_counterpart(server):
    page = get_json(server, "/api/episodes?run=A&versus=disagree&per_page=100")
    # B flipped the g0 answers, and B has no masked episodes (their counterpart is B's first of the sample)
    assert {r["episode_id"] for r in page["rows"]} >= {"s00000/g0", "s00001/g0"}
    assert all(r["other"] is not None and r["other"]["correct"] != r["correct"] for r in page["rows"])
    missing = get_json(server, "/api/episodes?run=A&versus=missing")
    assert missing["total"] == 0  # every A episode has a counterpart (by id or by sample)
    ep = get_json(server, "/api/episode?run=A&i=0")
    assert ep["counterpart"] == {"run": "B", "index": 0, "episode_id": "s00000/g0"}


def test_episode_and_its_frames(server, runs):
    run_a = runs[0]
    raws = [json.loads(x) for x in (run_a / "trajectories.jsonl").read_text().splitlines()]
    data = get_json(server, "/api/episode?run=A&i=2")
    ep = data["episode"]
    assert ep["episode_id"] == raws[2]["episode_id"] and ep["issues"] == []
    assert [(c["start"], c["end"]) for c in ep["calls"]] == [(t["call"]["start"], t["call"]["end"]) for t in raws[2]["turns"] if t["call"]]
    assert len(data["group"]) == 8 and {g["role"] for g in data["group"]} == {"origin", "perturbed"}
    frames = [f for t in ep["turns"] for f in t["observation"]["frames"]] + ep["initial"]["frames"]
    assert frames
    for f in frames:
        code, ctype, body = request(server, f["url"])
        assert code == 200 and ctype == "image/jpeg"
        assert body == (run_a / f["path"]).read_bytes()
    by_id = get_json(server, "/api/episode?run=A&id=" + "s00001/mask/g3".replace("/", "%2F"))
    assert by_id["episode"]["episode_id"] == "s00001/mask/g3"
    assert "no episode 99" in get_json(server, "/api/episode?run=A&i=99", 400)["error"]


TRAVERSALS = [
    "/frames/A/../secret.jpg", "/frames/A/..%2fsecret.jpg", "/frames/A/%2e%2e/secret.jpg", "/frames/A/%2E%2E%2Fsecret.jpg",
    "/frames/A/frames/../../secret.jpg", "/frames/A/..%5csecret.jpg", "/frames/A/%252e%252e/secret.jpg",
    "/frames/A/frames/escape.jpg", "/frames/A/%2fetc%2fpasswd", "/frames/A//etc/passwd", "/frames/A/frames%00.jpg",
    "/frames/../secret.jpg", "/frames/A/trajectories.jsonl", "/static/../secret.txt", "/static/%2e%2e/%2e%2e/secret.txt",
    "/static/..%2f..%2f..%2fsecret.txt", "/frames/A/%ff.jpg", "/frames/B/../run_a/frames/escape.jpg",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_no_path_outside_the_run_is_served(server, path):
    code, _, body = request(server, path)
    assert code in (403, 404), (code, body[:80])
    assert b"SECRET" not in body


def test_host_and_post_guards(server):
    code, _, body = request(server, "/api/runs", headers={"Host": "evil.example:80"})
    assert code == 403 and b"Host" in body
    code, _, body = request(server, "/api/play/start", "POST", {"sample_id": "x"})
    assert code == 403 and b"X-VideoSeek" in body
    assert "play mode is off" in post_json(server, "/api/play/start", {"sample_id": "x"}, 400)["error"]
    code, ctype, body = request(server, "/")
    assert code == 200 and ctype.startswith("text/html") and b"app.js" in body
    assert request(server, "/static/app.js")[0] == 200


def test_broken_run_keeps_working(tmp_path):
    run = tmp_path / "run"
    write_fixture_run(run, n_samples=1, group_size=2, perturbed=False)
    lines = (run / "trajectories.jsonl").read_text().splitlines()
    odd = json.loads(lines[1])
    odd["schema_version"], odd["episode_id"] = 99, "odd"
    first_frame = json.loads(lines[0])["turns"][0]["observation"]["frames"][0]["path"]
    (run / first_frame).unlink()
    (run / "trajectories.jsonl").write_text(lines[0] + "\n" + json.dumps(odd) + "\n" + lines[1][:100])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "trajectories.jsonl").write_text("")
    srv, thread = serve_in_thread(ViewerApp([run, empty]))
    try:
        page = get_json(srv, "/api/episodes?per_page=10")
        assert [r["problem"] is None for r in page["rows"]] == [True, False, False]
        assert "schema_version 99" in page["rows"][1]["problem"] and "truncated" in page["rows"][2]["problem"]
        ep = get_json(srv, "/api/episode?run=A&i=0")["episode"]
        assert ep["issues"] == [f"turn 0: frame file missing: {first_frame}"]
        assert ep["turns"][0]["observation"]["frames"][0]["missing"] == "file missing"
        assert "unknown schema_version 99" in get_json(srv, "/api/episode?run=A&i=1")["episode"]["issues"][0]
        assert "truncated last line" in get_json(srv, "/api/episode?run=A&i=2")["episode"]["issues"][0]
        assert request(srv, "/frames/A/" + first_frame)[0] == 404
        empty_page = get_json(srv, "/api/episodes?run=B")
        assert empty_page["total"] == 0 and "empty" in empty_page["status"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


@pytest.fixture
def play_setup(tmp_path, index_sample):
    data = write_jsonl([index_sample], tmp_path / "data" / "samples.jsonl")
    run = tmp_path / "run"
    write_fixture_run(run, n_samples=1, group_size=1, perturbed=False)
    return run, data


def test_play_one_episode_is_saved(play_setup):
    run, data = play_setup
    app = ViewerApp([run], play=PlayManager(data, run / "play"))
    srv, thread = serve_in_thread(app)
    try:
        assert get_json(srv, "/api/runs")["play"] == {"available": True, "reason": None}
        samples = get_json(srv, "/api/play/samples")["samples"]
        assert [s["id"] for s in samples] == ["idx-1"]
        st = post_json(srv, "/api/play/start", {"sample_id": "idx-1"})
        assert len(st["frames"]) == 8 and st["duration"] == pytest.approx(20.0)
        assert [t["function"]["name"] for t in st["tools"]] == ["crop_video"]  # the env's tools: the page offers these
        code, ctype, body = request(srv, st["frames"][0]["url"])
        assert code == 200 and ctype == "image/jpeg" and body[:2] == b"\xff\xd8"
        # the version-1 shape of a crop, as earlier pages sent it, still works
        bad = post_json(srv, "/api/play/step", {"session": st["session"], "action": {"type": "crop_video", "start": 15, "end": 11}})
        assert bad["error"].startswith("crop_video needs start < end") and bad["frames"] == []
        assert [(c["n"], c["rejected"], c["label"]) for c in bad["calls"]] == [(1, True, "crop_video(start=15, end=11)")]
        crop = post_json(srv, "/api/play/step", {"session": st["session"], "action": {
            "type": "tool_call", "name": "crop_video", "arguments": {"start": 11.5, "end": 14}, "think": "the flash"}})
        assert crop["error"] is None and crop["call"]["start"] == 11.5 and crop["call"]["tool"] == "crop_video"
        assert [(c["n"], c["start"], c["end"], c["gain"]) for c in crop["calls"]] == [(1, 15.0, 11.0, None), (2, 11.5, 14.0, None)]
        # the answer key stays on the server until the episode ends: no evidence, no crop gain, no clues
        assert "evidence" not in crop and "gain" not in crop["call"] and "evidence" not in st
        assert "clue_intervals" not in st and "clue_intervals" not in crop and st["has_clues"] is True
        assert all(11.5 <= f["t"] <= 14 for f in crop["frames"]) and crop["frames"]
        end = post_json(srv, "/api/play/step", {"session": st["session"], "action": {"type": "answer", "text": "B"}})
        assert end["terminated"] and end["correct"] is True and end["saved"]["ok"]
        assert end["evidence"]["coverage"] == pytest.approx(1.0) and end["clue_intervals"] == [[12.0, 13.5]]
        accepted = [c for c in end["calls"] if not c["rejected"]]
        assert [(c["turn"], c["start"], c["end"]) for c in accepted] == [(1, 11.5, 14.0)] and accepted[0]["gain"] > 0
        assert "ended" in post_json(srv, "/api/play/step", {"session": st["session"], "action": {"type": "answer", "text": "B"}}, 400)["error"]
        saved = Trajectory.model_validate_json((run / "play" / "trajectories.jsonl").read_text().splitlines()[0])
        assert "play" not in saved.metrics  # the clues were never asked for
        assert saved.policy == "human" and saved.correct is True and [t.tool_name for t in saved.turns] == ["crop_video", "crop_video", None]
        assert saved.turns[1].assistant.startswith("<think>the flash</think><tool_call>")
        view = get_json(srv, "/api/episode?run=play&id=" + saved.episode_id.replace("/", "%2F"))["episode"]
        assert view["issues"] == [] and len(view["turns"][1]["observation"]["frames"]) == len(crop["frames"])
        for f in view["turns"][1]["observation"]["frames"]:
            assert request(srv, f["url"])[0] == 200
        peek = post_json(srv, "/api/play/start", {"sample_id": "idx-1"})
        post_json(srv, "/api/play/step", {"session": peek["session"], "action": {"type": "crop_video", "start": 1, "end": 3}})
        assert post_json(srv, "/api/play/clues", {"session": peek["session"]}) == {"clue_intervals": [[12.0, 13.5]]}  # asked for: "show clue intervals"
        post_json(srv, "/api/play/step", {"session": peek["session"], "action": {"type": "answer", "text": "B"}})
        peeked = Trajectory.model_validate_json((run / "play" / "trajectories.jsonl").read_text().splitlines()[1])
        assert peeked.metrics["play"] == {"clues_shown_at_turn": 1}  # the saved episode says the player looked after one turn
        assert "not an open play session" in post_json(srv, "/api/play/clues", {"session": "zzz"}, 400)["error"]
        assert "not in" in post_json(srv, "/api/play/start", {"sample_id": "nope"}, 400)["error"]
        assert "action.type" in post_json(srv, "/api/play/step", {"session": st["session"], "action": {"type": "dance"}}, 400)["error"]
        for action, wrong in [({"type": "tool_call", "arguments": {}}, "action.name"), ({"type": "tool_call", "name": "zoom", "arguments": [1]}, "action.arguments"),
                              ({"type": "crop_video", "start": "soon", "end": 2}, "action.start")]:  # fmt: skip
            assert wrong in post_json(srv, "/api/play/step", {"session": peek["session"], "action": action}, 400)["error"]
        other = post_json(srv, "/api/play/start", {"sample_id": "idx-1"})
        unknown = post_json(srv, "/api/play/step", {"session": other["session"], "action": {"type": "tool_call", "name": "zoom", "arguments": {"time": 1}}})
        assert unknown["error"].startswith("unknown tool 'zoom'; this episode's tools: crop_video")  # the env, not the page, judges a call
        assert "not an open play session" in post_json(srv, "/api/play/step", {"session": "zzz", "action": {"type": "text", "text": ""}}, 400)["error"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_samples_file_is_found_from_the_run(tmp_path, play_setup):
    run, data = play_setup
    assert find_samples_file(run) is None  # fixture videos are not beside a dataset
    (run / "run.json").write_text(json.dumps({"data": str(data)}))
    assert find_samples_file(run) == data
    (run / "run.json").unlink()
    lines = (run / "trajectories.jsonl").read_text().splitlines()
    ep = json.loads(lines[0])
    ep["video"] = str(data.parent / "videos" / "x.mp4")
    (run / "trajectories.jsonl").write_text(json.dumps(ep) + "\n")
    assert find_samples_file(run) == data
    assert PlayManager(None, run / "play").available() == (False, "no dataset: start the viewer with --data samples.jsonl")


def test_export_is_self_contained(runs, tmp_path):
    run_a, run_b, _ = runs
    out = tmp_path / "share.html"
    report = export_runs([run_a, run_b], out, limit=10, thumb=48, progress=False)
    html = out.read_text()
    assert report.episodes == {"A": 10, "B": 8} and report.skipped == {"A": 6, "B": 0}
    assert "/static/" not in html and not re.search(r"""(src|href)=["']https?:""", html)
    data = json.loads(re.search(r'<script id="viewer-data" type="application/json">(.*?)</script>', html, re.DOTALL).group(1))
    assert len(data["rows"]["A"]) == 10 and set(data["episodes"]["A"]) == {str(i) for i in range(10)}
    frames = [f for ep in data["episodes"]["A"].values() for t in ep["turns"] for f in t["observation"]["frames"]]
    assert frames and all(f["url"].startswith("data:image/jpeg;base64,") for f in frames)
    import base64
    import io

    thumb = Image.open(io.BytesIO(base64.b64decode(frames[0]["url"].split(",", 1)[1])))
    assert max(thumb.size) <= 48


def test_cli_export_and_errors(runs, tmp_path, capsys):
    out = tmp_path / "cli.html"
    assert main(["view", str(runs[0]), "--export", str(out), "--limit", "3"]) == 0
    assert out.is_file() and "13 episodes left out" in capsys.readouterr().out
    assert main(["view", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a run folder" in err


@pytest.mark.timeout(60)
def test_cli_serves_on_loopback(runs):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "videoseek", "view", str(runs[0]), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # run A, "indexed in", the URL
        assert lines[0].startswith("run A: ") and lines[0].rstrip().endswith("16 episodes"), lines
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", lines[2])
        assert m, lines
        conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=10)
        conn.request("GET", "/api/runs")
        body = json.loads(conn.getresponse().read())
        assert body["runs"][0]["episodes"] == 16 and body["play"]["available"] is False
    finally:
        proc.terminate()
        proc.wait(10)


def test_folder_of_runs_lists_and_selects_them(runs, tmp_path, capsys):
    parent = runs[2]
    names = ["run_a", "run_b"]
    app = ViewerApp([parent])
    srv, thread = serve_in_thread(app)
    try:
        info = get_json(srv, "/api/runs")["parent"]
        assert info["path"] == str(parent.resolve()) and info["selected"] == []
        assert [r["name"] for r in info["runs"]] == names and {r["name"]: r["episodes"] for r in info["runs"]}[runs[0].name] == 16
        picked = post_json(srv, "/api/select", {"a": runs[0].name})
        assert [r["key"] for r in picked["runs"]] == ["A"] and picked["parent"]["selected"] == [runs[0].name]
        assert get_json(srv, "/api/episodes?run=A")["all"] == 16
        both = post_json(srv, "/api/select", {"a": runs[0].name, "b": runs[1].name})
        assert both["compare"] is True and [r["path"] for r in both["runs"]] == [str(runs[0].resolve()), str(runs[1].resolve())]
        assert get_json(srv, "/api/episode?run=A&i=0")["counterpart"]["run"] == "B"
        assert "is not a run in" in post_json(srv, "/api/select", {"a": "../etc"}, 400)["error"]
        assert "two different runs" in post_json(srv, "/api/select", {"a": runs[0].name, "b": runs[0].name}, 400)["error"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
    single = ViewerApp([runs[0]])
    assert single.api_runs()["parent"] is None
    with pytest.raises(Exception, match="not started on a folder of runs"):
        single.select({"a": "x"})
    assert main(["view", str(parent), "--export", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "a folder of runs" in err and "export one of them" in err


@pytest.mark.timeout(60)
def test_cli_on_a_folder_of_runs_lists_them(runs):
    parent = runs[2]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "videoseek", "view", str(parent), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = [proc.stdout.readline().rstrip() for _ in range(5)]  # the folder, its two runs, "indexed in", the URL
        assert lines[0] == f"{parent.resolve()}: a folder of 2 runs (pick one, or two to compare, on the page):", lines
        assert lines[1:3] == ["  run_a: 16 episodes", "  run_b: 8 episodes"], lines
        assert "VideoSeek viewer on http://127.0.0.1:" in lines[4], lines
    finally:
        proc.terminate()
        proc.wait(10)
