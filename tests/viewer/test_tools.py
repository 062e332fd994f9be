"""Calls of any tool in the viewer: episodes played by the real env (a synthetic small_text video,
`EnvConfig(tools=["crop_video", "zoom"])`, and the custom tool of examples/custom_tool.py), written
by the rollout runner's `TrajectoryWriter`, then served: the episode JSON draws each call from what
it returned (a span, a box on its frame, the frames of any other tool, a rejection's reason), play
mode offers the env's tools, and the page shows a zoom's box on its frame (headless Chromium)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from viewer_http import get_json, post_json, request
from videoseek.envs import EnvConfig, VideoSeekEnv
from videoseek.envs.sample import write_jsonl
from videoseek.envs.synth import generate_dataset
from videoseek.envs.trajectory import TrajectoryWriter
from videoseek.viewer.cli import play_env_config
from videoseek.viewer.play import PlayManager
from videoseek.viewer.server import ViewerApp, serve_in_thread

from videoseek.envs.errors import UserError

CUSTOM = str(Path(__file__).resolve().parents[2] / "examples" / "custom_tool.py") + ":FrameAtTool"
ZOOM_TOOLS = ["crop_video", "zoom"]


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def play(sample, tools, texts, run: Path, episode_id: str) -> None:
    """The real env on scripted assistant texts, the finished episode written as the runner writes it."""
    env = VideoSeekEnv(sample, EnvConfig(tools=tools))
    env.reset(options={"episode_id": episode_id, "policy": "scripted"})
    for text in texts:
        *_, terminated, truncated, _ = env.step(text)
        if terminated or truncated:
            break
    TrajectoryWriter(run).write(env.trajectory, env.frames_by_turn)


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory):
    """One small_text sample; a run with a zoom episode (crop, zoom on the sign, a refused zoom,
    answer) and a custom-tool episode (frame_at, a refused frame_at, answer)."""
    base = tmp_path_factory.mktemp("tools")
    (sample,) = generate_dataset(base / "data", 1, kinds=["small_text"])
    (s, e), key = sample.clue_intervals[0], sample.key_frames[0]
    (box,) = key.boxes.values()
    padded = [round(box[0] - 0.02, 4), round(box[1] - 0.02, 4), round(box[2] + 0.02, 4), round(box[3] + 0.02, 4)]
    run = base / "run"
    play(sample, ZOOM_TOOLS, [call("crop_video", start=s - 0.5, end=e + 0.5), call("zoom", time=key.time, box=padded),
                              call("zoom", time=key.time, box=[0.5, 0.5, 0.4, 0.6]), f"<answer>{sample.answer}</answer>"], run, "zoom")  # fmt: skip
    play(sample, ["crop_video", CUSTOM], [call("frame_at", time=5.0), call("frame_at", time=99.0), "<answer>A</answer>"], run, "custom")
    return run, sample, padded


@pytest.fixture(scope="module")
def site(tool_run):
    run, sample, _ = tool_run
    data = write_jsonl([sample], run.parent / "play-data" / "samples.jsonl")
    srv, thread = serve_in_thread(ViewerApp([run], play=PlayManager(data, run / "play", EnvConfig(tools=ZOOM_TOOLS))))
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def raw_of(run: Path, episode_id: str) -> dict:
    return next(r for r in map(json.loads, (run / "trajectories.jsonl").read_text().splitlines()) if r["episode_id"] == episode_id)


def test_a_zoom_episode_is_drawn_from_what_its_calls_returned(site, tool_run):
    run, sample, padded = tool_run
    raw = raw_of(run, "zoom")
    assert raw["schema_version"] == 2
    ep = get_json(site, "/api/episode?run=A&id=zoom")["episode"]
    assert ep["issues"] == []
    crop, zoom, refused = ep["calls"]
    recorded = raw["turns"][1]["call"]
    # the crop: a span on the timeline, with its evidence gain
    assert (crop["tool"], crop["start"], crop["end"], crop["box"]) == ("crop_video", raw["turns"][0]["call"]["start"], raw["turns"][0]["call"]["end"], None)
    assert crop["gain"] == pytest.approx(raw["turns"][0]["call"]["gain"]) and crop["label"].startswith("crop_video(start=")
    # the zoom: a box at the frame's time, clipped to the frame where it was written past the edge
    clipped = [min(max(v, 0.0), 1.0) for v in padded]
    assert (zoom["tool"], zoom["start"], zoom["end"], zoom["gain"]) == ("zoom", None, None, None)
    assert zoom["time"] == pytest.approx(recorded["time"]) and zoom["box"] == pytest.approx(clipped) and zoom["clipped"] == (clipped != padded)
    assert zoom["box_iou"] == pytest.approx(recorded["box_iou"]) and zoom["box_iou"] > 0.5  # it looked at the sign
    assert zoom["label"] == "zoom(time={:g}, box=[{}])".format(round(recorded["arguments"]["time"], 3), ", ".join(f"{round(v, 3):g}" for v in recorded["arguments"]["box"]))
    # the box is drawn on the nearest whole frame: one the crop returned, near the zoom's time, served
    crop_frames = ep["turns"][0]["observation"]["frames"]
    nearest = min(crop_frames + ep["initial"]["frames"], key=lambda f: abs(f["t"] - zoom["time"]))
    assert zoom["frame"]["t"] == nearest["t"] and zoom["frame"]["url"] == nearest["url"] and zoom["frame"]["source"] == "turn 0"
    assert request(site, zoom["frame"]["url"])[0] == 200
    # the zoomed frame itself is the zoom turn's observation, served like any frame
    (zoomed,) = ep["turns"][1]["observation"]["frames"]
    assert zoomed["t"] == pytest.approx(zoom["time"]) and zoom["times"] == [zoomed["t"]]
    code, ctype, body = request(site, zoomed["url"])
    assert code == 200 and ctype == "image/jpeg" and body == (run / zoomed["path"]).read_bytes()
    # the refused zoom: its arguments as written and the env's one-line reason
    assert refused["rejected"] and refused["tool"] == "zoom" and refused["reason"].startswith("zoom box needs x1 < x2")
    assert refused["label"] == f"zoom(time={key_time(sample):g}, box=[0.5, 0.5, 0.4, 0.6])" and refused["time"] == pytest.approx(key_time(sample))
    assert ep["turns"][2]["error"] == refused["reason"]
    listing = get_json(site, "/api/episodes?q=zoom")
    assert [(r["episode_id"], r["calls"], r["problem"]) for r in listing["rows"]] == [("zoom", 2, None)]


def key_time(sample) -> float:
    return round(sample.key_frames[0].time, 3)


def test_a_custom_tools_calls_are_labelled_and_their_frames_ticked(site, tool_run):
    run, _, _ = tool_run
    raw = raw_of(run, "custom")
    assert [t["action"].get("name") for t in raw["turns"]] == ["frame_at", "frame_at", None]
    ep = get_json(site, "/api/episode?run=A&id=custom")["episode"]
    assert ep["issues"] == []
    frame_at, refused = ep["calls"]
    (frame,) = ep["turns"][0]["observation"]["frames"]
    assert (frame_at["tool"], frame_at["label"], frame_at["times"], frame_at["rejected"]) == ("frame_at", "frame_at(time=5)", [frame["t"]], False)
    assert frame_at["start"] is frame_at["end"] is frame_at["box"] is None and abs(frame["t"] - 5.0) < 0.2
    assert refused["rejected"] and refused["label"] == "frame_at(time=99)" and "outside the video" in refused["reason"]
    assert request(site, frame["url"])[0] == 200


def test_an_export_carries_the_box_and_its_frame(tool_run, tmp_path):
    import re

    from videoseek.viewer.export import export_runs

    run, _, _ = tool_run
    out = tmp_path / "tools.html"
    export_runs([run], out, thumb=64, progress=False)
    data = json.loads(re.search(r'<script id="viewer-data" type="application/json">(.*?)</script>', out.read_text(), re.DOTALL).group(1))
    (zoom_ep,) = [ep for ep in data["episodes"]["A"].values() if ep["episode_id"] == "zoom"]
    zoom = zoom_ep["calls"][1]
    assert zoom["box"] and zoom["frame"]["url"].startswith("data:image/jpeg;base64,")  # the frame to draw the box on travels with it


def test_play_offers_the_envs_tools_and_zooms(site, tool_run):
    _, sample, padded = tool_run
    st = post_json(site, "/api/play/start", {"sample_id": sample.id})
    assert [t["function"]["name"] for t in st["tools"]] == ZOOM_TOOLS
    key = sample.key_frames[0]
    out = post_json(site, "/api/play/step", {"session": st["session"], "action": {"type": "tool_call", "name": "zoom", "arguments": {"time": key.time, "box": padded}}})
    assert out["error"] is None and len(out["frames"]) == 1 and out["call"]["tool"] == "zoom" and "box_iou" not in out["call"]
    (zoom,) = out["calls"]
    assert zoom["box"] == pytest.approx([min(max(v, 0.0), 1.0) for v in padded]) and zoom["box_iou"] is None  # the answer key waits for the answer
    assert zoom["frame"]["source"] == "initial" and zoom["frame"]["url"].startswith(f"/play-frames/{st['session']}/init/")
    end = post_json(site, "/api/play/step", {"session": st["session"], "action": {"type": "answer", "text": sample.answer}})
    assert end["correct"] is True and end["calls"][0]["box_iou"] > 0.5 and end["saved"]["ok"]
    saved = get_json(site, "/api/episode?run=play&id=" + end["saved"]["episode_id"].replace("/", "%2F"))["episode"]
    assert saved["issues"] == [] and saved["calls"][0]["box"] == zoom["box"]


def test_play_mode_takes_the_runs_tools(tool_run, tmp_path):
    run, _, _ = tool_run
    args = lambda **kw: argparse.Namespace(**{"tools": None, "env_config": None, **kw})  # noqa: E731
    assert play_env_config(args(), run) is None  # no run.json: EnvConfig's defaults
    (run / "run.json").write_text(json.dumps({"env": {"tools": ZOOM_TOOLS}}))
    try:
        assert play_env_config(args(), run).tools == ZOOM_TOOLS  # the tools the run was made with
        assert play_env_config(args(tools="zoom"), run).tools == ["zoom"]
        config = tmp_path / "env.json"
        config.write_text(json.dumps({"max_turns": 3}))
        assert play_env_config(args(env_config=config), run).tools == ["crop_video"]  # the file's (default) tools, not the run's
        assert play_env_config(args(env_config=config, tools="crop_video,zoom"), run).model_dump(include={"tools", "max_turns"}) == {"tools": ZOOM_TOOLS, "max_turns": 3}
        with pytest.raises(UserError, match="^--tools: unknown tool 'nope'"):
            play_env_config(args(tools="nope"), run)
    finally:
        (run / "run.json").unlink()


# ---- the page ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    from browser_support import CHROMIUM, CHROMIUM_ARGS, sync_api_or_skip

    sync_api = sync_api_or_skip()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def save_shot(page, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot in VIEWER_SCREENSHOTS (when set, to look at by eye) or the test's folder."""
    folder = Path(os.environ["VIEWER_SCREENSHOTS"]) if os.environ.get("VIEWER_SCREENSHOTS") else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    return folder / f"{name}.png"


def test_the_page_draws_a_zoom_box_on_its_frame_and_on_the_timeline(page, site, tool_run, tmp_path):
    run, _, _ = tool_run
    ep = get_json(site, "/api/episode?run=A&id=zoom")["episode"]
    zoom = ep["calls"][1]
    page.goto(site.url + "#/episode/A/id/zoom?turn=2")  # after the zoom turn
    panel = page.locator("section.panel.episode[data-run=A]")
    panel.locator(".turn[data-turn='1']").wait_for()
    # on the timeline: the call's lane holds the frame in miniature with the box in it, at the zoom's time
    mark = panel.locator("svg.timeline g.box-call")
    assert mark.count() == 1 and json.loads(mark.get_attribute("data-box")) == pytest.approx(zoom["box"])
    assert float(mark.get_attribute("data-time")) == pytest.approx(zoom["time"]) and "current" in mark.get_attribute("class")
    tick_x = float(mark.locator("line.box-tick").get_attribute("x1"))
    assert tick_x == pytest.approx(panel.locator("svg.timeline").evaluate(f"s => s.timeAt({zoom['time']})"))
    frame, region = mark.locator("rect.box-frame"), mark.locator("rect.box-region")
    fx, fw = float(frame.get_attribute("x")), float(frame.get_attribute("width"))
    assert float(region.get_attribute("x")) == pytest.approx(fx + zoom["box"][0] * fw)
    # the zoomed frame itself, loaded
    page.wait_for_function("[...document.querySelectorAll('section[data-run=A] .turn img')].every(i => i.complete && i.naturalWidth > 0)")
    assert panel.locator(".turn > .frames img").evaluate_all("els => els.map(e => e.getAttribute('src'))") == [ep["turns"][1]["observation"]["frames"][0]["url"]]
    # the box drawn over the nearest whole frame, where the fractions put it
    img = panel.locator(".box-view img").bounding_box()
    drawn = panel.locator(".box-view .zoom-box").bounding_box()
    x1, y1, x2, y2 = zoom["box"]
    assert drawn["x"] == pytest.approx(img["x"] + x1 * img["width"], abs=1.5) and drawn["y"] == pytest.approx(img["y"] + y1 * img["height"], abs=1.5)
    assert drawn["width"] == pytest.approx((x2 - x1) * img["width"], abs=2) and drawn["height"] == pytest.approx((y2 - y1) * img["height"], abs=2)
    assert panel.locator(".box-view img").get_attribute("src") == zoom["frame"]["url"]
    # the refused zoom: a cross with the env's reason; the call list names every call
    assert "zoom box needs x1 < x2" in panel.locator("svg.timeline text.call-label").last.text_content()
    assert panel.locator("ul.calls li").all_inner_texts()[1].startswith("#2 turn 1: " + zoom["label"] + " → the region at")
    shot = save_shot(page, tmp_path, "zoom-episode")
    assert shot.stat().st_size > 10_000
    # the custom tool: a tick at the frame it returned, its call as a label
    page.goto(site.url + "#/episode/A/id/custom?turn=1")
    panel.locator(".turn[data-turn='0']").wait_for()
    ticks = panel.locator("svg.timeline g.tool-call line.call-tick").evaluate_all("els => els.map(e => Number(e.dataset.t))")
    custom = get_json(site, "/api/episode?run=A&id=custom")["episode"]
    assert ticks == custom["calls"][0]["times"]
    labels = panel.locator("svg.timeline text.call-label").all_text_contents()
    assert labels[0] == "1 frame_at(time=5)" and "outside the video" in labels[1]
    save_shot(page, tmp_path, "custom-tool-episode")


def test_play_zooms_by_dragging_a_box_on_a_frame(page, site, tool_run, tmp_path):
    _, sample, _ = tool_run
    page.goto(site.url + "#/play")
    page.click("#play-start")
    page.wait_for_selector("#play-tools .play-tool[data-tool=zoom]")
    assert page.locator("#play-tools .play-tool").evaluate_all("els => els.map(e => e.dataset.tool)") == ZOOM_TOOLS
    page.wait_for_function("[...document.querySelectorAll('#play-episode img')].every(i => i.complete && i.naturalWidth > 0)")
    # drag a box on the initial frame nearest the key frame
    key = sample.key_frames[0]
    figures = page.locator("#play-episode > .frames figure.box-target")
    times = figures.evaluate_all("els => els.map(e => Number(e.dataset.t))")
    k = min(range(len(times)), key=lambda i: abs(times[i] - key.time))
    img = figures.nth(k).locator("img").bounding_box()
    x1, y1, x2, y2 = 0.5, 0.25, 0.75, 0.75
    page.mouse.move(img["x"] + x1 * img["width"], img["y"] + y1 * img["height"])
    page.mouse.down()
    page.mouse.move(img["x"] + x2 * img["width"], img["y"] + y2 * img["height"], steps=5)
    page.mouse.up()
    box = [float(v) for v in page.input_value("input[data-tool=zoom][name=box]").split(",")]
    assert box == pytest.approx([x1, y1, x2, y2], abs=0.01) and float(page.input_value("input[data-tool=zoom][name=time]")) == times[k]
    page.click("button.play-call[data-tool=zoom]")
    page.wait_for_selector("#play-log .play-turn[data-turn='0'] .box-view .zoom-box")
    assert page.locator("#play-log .play-turn[data-turn='0'] > .frames img").count() == 1  # the zoomed frame
    assert page.locator("#play-timeline svg.timeline g.box-call").count() == 1
    page.wait_for_function("[...document.querySelectorAll('#play-log img')].every(i => i.complete && i.naturalWidth > 0)")
    save_shot(page, tmp_path, "play-zoom")
    page.fill("#play-answer", sample.answer)
    page.click("#play-answer-btn")
    page.wait_for_selector("#play-result")
    assert "box IoU" in page.locator("#play-calls").inner_text()  # scored against the key frames, now that the answer is in


# ---- verl's dumps -----------------------------------------------------------------------------------
def agent_loop_view(sample, tools, texts) -> dict:
    """The `videoseek_episode` a verl dump line carries for an episode of the real env: the sample
    and the agent loop's record (`records.episode_view` of its summary and calls per tool)."""
    from videoseek.training.verl_plugin.records import episode_view, summary_to_dict

    env = VideoSeekEnv(sample, EnvConfig(tools=tools))
    env.reset(options={"episode_id": "verl", "policy": "verl"})
    for text in texts:
        *_, terminated, _, _ = env.step(text)
        if terminated:
            break
    per_tool: dict[str, int] = {}
    for c in env.trajectory.calls:
        per_tool[c.tool] = per_tool.get(c.tool, 0) + 1
    record = {"episode": summary_to_dict(env.summary()), "calls": [list(c) for c in env.summary().calls], "tool_calls": per_tool,
              "reward_components": {}, "ended_by": "env", "failure": None}  # fmt: skip
    return {"turns": env.trajectory.turns, "view": episode_view(sample, record)}


def test_verl_dump_lines_rebuild_calls_of_any_tool(tool_run):
    """A legacy verl dump holds the agent loop's summary, not the calls: each call is matched to
    the spans, regions and per-tool counts it records, and drawn like the env's own episode."""
    from videoseek.viewer.episode import episode_view as view_of
    from videoseek.viewer.verldump import convert_line

    _, sample, padded = tool_run
    (s, e), key = sample.clue_intervals[0], sample.key_frames[0]
    texts = [call("crop_video", start=s - 0.5, end=e + 0.5), call("zoom", time=key.time, box=[1.2, 0.5, 1.4, 0.6]),  # refused: off the frame
             call("zoom", time=key.time, box=padded), call("frame_at", time=5.0), call("frame_at", time=99.0), "<answer>B</answer>"]  # fmt: skip
    played = agent_loop_view(sample, ["crop_video", "zoom", CUSTOM], texts)
    line = {"output": "".join(texts), "score": 1.0, "acc": 1.0, "videoseek_episode": played["view"]}
    raw = json.loads(convert_line(json.dumps(line).encode(), line, 3, 0, {}))
    assert raw["schema_version"] == 2
    ep = view_of(raw, Path("."), str)
    assert ep["issues"] == []
    env_calls = [t.call for t in played["turns"]]
    got = [(c["tool"], c["rejected"]) for c in ep["calls"]]
    assert got == [("crop_video", False), ("zoom", True), ("zoom", False), ("frame_at", False), ("frame_at", True)]
    assert [t["call"] is not None for t in raw["turns"]] == [c is not None for c in env_calls]
    crop, _, zoom, frame_at, _ = ep["calls"]
    assert (crop["start"], crop["end"]) == env_calls[0].span and crop["gain"] == pytest.approx(env_calls[0].gain)
    assert zoom["time"] == pytest.approx(env_calls[2].time) and zoom["box"] == pytest.approx(env_calls[2].box)
    assert zoom["box_iou"] == pytest.approx(env_calls[2].box_iou)  # scored against the key frames as the env scored it
    assert frame_at["label"] == "frame_at(time=5)"
    assert all(c["reason"] == "rejected by the env (the reason is not in verl's dump)" for c in ep["calls"] if c["rejected"])
    assert raw["metrics"]["verl"]["notes"] == []


def test_verl_dump_replays_the_evidence_with_the_runs_thresholds(index_sample):
    """A dump's crops are replayed with the duplicate threshold of the reward config the episode
    was scored with (the agent loop's record holds it), not the default one."""
    from videoseek.rewards import RewardConfig
    from videoseek.viewer.verldump import convert_line

    sample = index_sample.model_copy(update={"clue_intervals": [(10.0, 20.0)]})
    texts = [call("crop_video", start=10.0, end=20.0), call("crop_video", start=10.0, end=17.5), "<answer>B</answer>"]  # tIoU 0.75
    played = agent_loop_view(sample, ["crop_video"], texts)
    marks = {}
    for tiou in (0.7, 0.8):
        view = json.loads(played["view"])
        view["record"]["reward_config"] = RewardConfig(clue_seek={"duplicate_tiou": tiou}).model_dump(mode="json")
        line = {"output": "".join(texts), "score": 1.0, "acc": 1.0, "videoseek_episode": json.dumps(view)}
        raw = json.loads(convert_line(json.dumps(line).encode(), line, 3, 0, {}))
        marks[tiou] = [t["call"]["duplicate_of"] for t in raw["turns"] if t["call"]]
    assert marks == {0.7: [None, 0], 0.8: [None, None]}


def test_verl_dump_replays_coverage_by_the_frames_the_record_holds(index_sample):
    """With `clue_seek.coverage_by: frames` the replay reads the frame times the agent loop's record
    holds: the first crop's 8 frames step over the clue [12, 13.5], so it covers nothing, as in the env."""
    from videoseek.rewards import RewardConfig
    from videoseek.viewer.verldump import convert_line

    texts = [call("crop_video", start=0.0, end=20.0), call("crop_video", start=12.0, end=13.5), "<answer>B</answer>"]
    played = agent_loop_view(index_sample, ["crop_video"], texts)
    assert not any(12 <= f.t <= 13.5 for f in played["turns"][0].observation.frames)
    coverage = {}
    for mode in ("span", "frames"):
        view = json.loads(played["view"])
        view["record"]["reward_config"] = RewardConfig(clue_seek={"coverage_by": mode}).model_dump(mode="json")
        line = {"output": "".join(texts), "score": 1.0, "acc": 1.0, "videoseek_episode": json.dumps(view)}
        raw = json.loads(convert_line(json.dumps(line).encode(), line, 3, 0, {}))
        coverage[mode] = [t["evidence"]["coverage"] for t in raw["turns"][:2]]
    assert coverage == {"span": [1.0, 1.0], "frames": [0.0, 1.0]}
