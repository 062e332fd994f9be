"""End to end on a real run: `videoseek synth` + `videoseek rollout` (oracle, a group of 2 and a
DM-GRPO masked group), then the viewer's endpoints, the page in headless Chromium, and play mode
on the dataset the run was made from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from viewer_http import get_json, post_json, request
from videoseek.envs.sample import VideoSample
from videoseek.viewer.play import PlayManager, find_samples_file
from videoseek.viewer.server import ViewerApp, serve_in_thread

from videoseek.cli import main


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("e2e")
    assert main(["synth", "--out", str(base / "data"), "--n", "2", "--kinds", "flash_shape,direction", "--min-duration", "8", "--max-duration", "12"]) == 0
    run = base / "run"
    assert main(["rollout", "--data", str(base / "data" / "samples.jsonl"), "--policy", "oracle", "--out", str(run),
                 "--group-size", "2", "--perturb", "mask", "--no-progress"]) == 0  # fmt: skip
    return run, base / "data" / "samples.jsonl"


@pytest.fixture(scope="module")
def site(real_run):
    run, data = real_run
    assert find_samples_file(run) == data  # found from the run's video paths, no --data needed
    srv, thread = serve_in_thread(ViewerApp([run], play=PlayManager(find_samples_file(run), run / "play")))
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def trajectories(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]


def test_every_episode_of_a_real_run_is_shown_whole(site, real_run):
    run, _ = real_run
    raws = trajectories(run)
    assert len(raws) == 8 and {r["group"]["role"] for r in raws} == {"origin", "perturbed"}
    listing = get_json(site, "/api/episodes?per_page=100")
    assert [r["episode_id"] for r in listing["rows"]] == [r["episode_id"] for r in raws]
    for i, raw in enumerate(raws):
        ep = get_json(site, f"/api/episode?run=A&i={i}")["episode"]
        assert ep["issues"] == [], (raw["episode_id"], ep["issues"])
        calls = [t["call"] for t in raw["turns"] if t["call"]]
        assert [(c["start"], c["end"], c["gain"]) for c in ep["calls"] if not c["rejected"]] == [(c["start"], c["end"], c["gain"]) for c in calls]
        if raw["group"]["role"] == "perturbed":
            assert ep["masked_ranges"] == [raw["group"]["perturbation"]["time_range"]]
        for turn, view in zip(raw["turns"], ep["turns"]):
            assert [f["t"] for f in view["observation"]["frames"]] == [f["t"] for f in turn["observation"]["frames"]]
            for f in view["observation"]["frames"]:
                code, ctype, body = request(site, f["url"])
                assert code == 200 and ctype == "image/jpeg" and body == (run / f["path"]).read_bytes()


def test_play_a_real_sample_through_the_api(site, real_run):
    _, data = real_run
    sample = VideoSample.from_jsonl(data)[0]
    st = post_json(site, "/api/play/start", {"sample_id": sample.id})
    s, e = sample.clue_intervals[0]
    crop = post_json(site, "/api/play/step", {"session": st["session"], "action": {"type": "crop_video", "start": max(0.0, s - 0.2), "end": e + 0.2}})
    assert crop["error"] is None and "evidence" not in crop  # coverage is the answer key: sent only at the end
    end = post_json(site, "/api/play/step", {"session": st["session"], "action": {"type": "answer", "text": sample.answer, "think": "I saw it."}})
    assert end["correct"] is True and end["saved"]["ok"] and end["evidence"]["coverage"] == pytest.approx(1.0)
    view = get_json(site, "/api/episode?run=play&id=" + end["saved"]["episode_id"].replace("/", "%2F"))["episode"]
    assert view["issues"] == [] and view["policy"] == "human" and view["calls"][0]["start"] == pytest.approx(max(0.0, s - 0.2), abs=1e-3)  # play writes times to the millisecond


def test_real_run_in_the_browser(site, real_run):
    from browser_support import CHROMIUM_ARGS, CHROMIUM, sync_api_or_skip

    sync_api = sync_api_or_skip()  # skips this test (with the reason) without Chromium
    run, _ = real_run
    raws = trajectories(run)
    k = next(i for i, r in enumerate(raws) if r["group"]["role"] == "perturbed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(10_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(site.url)
        page.wait_for_selector("#episode-table tbody tr")
        assert page.locator("#episode-table tbody tr").count() == len(raws)
        page.locator(f"#episode-table tbody tr[data-index='{k}']").click()
        panel = page.locator("section.panel.episode[data-run=A]")
        panel.locator("svg.timeline rect.masked-range").wait_for()
        raw = raws[k]
        spans = panel.locator("svg.timeline .call").evaluate_all("els => els.map(e => [Number(e.dataset.start), Number(e.dataset.end)])")
        assert spans == [[t["call"]["start"], t["call"]["end"]] for t in raw["turns"] if t["call"]]
        for turn in raw["turns"]:
            page.keyboard.press("ArrowRight")
            panel.locator(f".turn[data-turn='{turn['index']}']").wait_for()
            frames = turn["observation"]["frames"]
            assert panel.locator(".turn figure").count() == len(frames)
            assert panel.locator(".turn figure.masked").count() == sum(f["masked"] for f in frames)
        browser.close()
    assert errors == []


def test_a_zoom_run_of_the_cli_is_drawn_and_played_with_its_tools(tmp_path):
    """`videoseek rollout --tools crop_video,zoom` on small_text: the oracle crops and zooms; every
    zoom is drawn as a box on a frame, and play mode offers the tools run.json records."""
    import argparse

    from videoseek.viewer.cli import play_env_config

    assert main(["synth", "--out", str(tmp_path / "data"), "--n", "1", "--kinds", "small_text"]) == 0
    run = tmp_path / "run"
    assert main(["rollout", "--data", str(tmp_path / "data" / "samples.jsonl"), "--policy", "oracle", "--out", str(run),
                 "--tools", "crop_video,zoom", "--no-progress"]) == 0  # fmt: skip
    (raw,) = trajectories(run)
    config = play_env_config(argparse.Namespace(tools=None, env_config=None), run)
    assert config.tools == ["crop_video", "zoom"]  # from the run's run.json
    srv, thread = serve_in_thread(ViewerApp([run], play=PlayManager(find_samples_file(run), run / "play", config)))
    try:
        ep = get_json(srv, "/api/episode?run=A&i=0")["episode"]
        assert ep["issues"] == [] and raw["correct"] is True
        zooms = [c for c in ep["calls"] if c["box"] is not None]
        assert zooms and [c["tool"] for c in zooms] == ["zoom"] * len(zooms)
        for c in zooms:
            recorded = raw["turns"][c["turn"]]["call"]
            assert c["box"] == recorded["box"] and c["time"] == recorded["time"] and c["box_iou"] == recorded["box_iou"]
            assert c["frame"] is not None and request(srv, c["frame"]["url"])[0] == 200 and c["label"].startswith("zoom(time=")
        st = post_json(srv, "/api/play/start", {"sample_id": raw["sample_id"]})
        assert [t["function"]["name"] for t in st["tools"]] == ["crop_video", "zoom"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
