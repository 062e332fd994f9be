"""The viewer page in a real headless Chromium (Debian's `chromium`, driven by Playwright).

One browser for the module. Skipped, with the reason, when /usr/bin/chromium or the `playwright`
package is missing (`make browser` installs Chromium; playwright comes with the `dev` extra; never
run `playwright install`, which downloads browsers).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from videoseek.envs.sample import write_jsonl
from videoseek.viewer.export import export_runs
from videoseek.viewer.fixtures import write_compare_runs, write_fixture_run
from videoseek.viewer.play import PlayManager
from videoseek.viewer.server import ViewerApp, serve_in_thread

from browser_support import CHROMIUM, CHROMIUM_ARGS, sync_api_or_skip

CROP_START, CROP_END, CROP_BUTTON = "input[data-tool=crop_video][name=start]", "input[data-tool=crop_video][name=end]", "button.play-call[data-tool=crop_video]"
SHOTS = Path(os.environ.get("VIEWER_SCREENSHOTS", "")) if os.environ.get("VIEWER_SCREENSHOTS") else None
sync_api = sync_api_or_skip(module_level=True)


def shot(page, name: str) -> None:
    """Save a screenshot when VIEWER_SCREENSHOTS names a folder (for looking at the page by eye)."""
    if SHOTS is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory, index_video):
    """A server over run A (fixture, with masked groups), run B (same ids, g0 flipped) and play mode."""
    from videoseek.envs.sample import VideoSample

    base = tmp_path_factory.mktemp("browser")
    run_a, run_b = write_compare_runs(base)
    sample = VideoSample(id="play-1", video=str(index_video), question="Which colour flashes?", options=["A. red", "B. green"], answer="B",
                         clue_intervals=[(12.0, 13.5)], metadata={"task_kind": "test"})  # fmt: skip
    data = write_jsonl([sample], base / "data" / "samples.jsonl")
    srv, thread = serve_in_thread(ViewerApp([run_a, run_b], play=PlayManager(data, run_a / "play")))
    yield {"url": srv.url, "a": run_a, "b": run_b, "base": base}
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def raws(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "trajectories.jsonl").read_text().splitlines()]


def test_list_filter_and_open(page, site):
    page.goto(site["url"])
    page.wait_for_selector("#episode-table tbody tr")
    assert page.locator("#episode-table tbody tr").count() == 16
    wrong = [r["episode_id"] for r in raws(site["a"]) if r["correct"] is False]
    page.select_option("select[name=outcome]", "wrong")
    page.wait_for_function(f"document.querySelectorAll('#episode-table tbody tr').length === {len(wrong)}")
    assert page.locator("#episode-table tbody tr").evaluate_all("rs => rs.map(r => r.dataset.episode)") == wrong
    page.fill("input[name=q]", "s00001")
    expected = [e for e in wrong if e.startswith("s00001")]
    page.wait_for_function(f"document.querySelectorAll('#episode-table tbody tr').length === {len(expected)}")
    assert page.locator("#list-count").inner_text().startswith(f"{len(expected)} of 16")
    page.select_option("select[name=versus]", "disagree")  # A right where B (flipped) is wrong, or the reverse
    page.wait_for_selector("#no-rows")  # A's wrong answers are g1, which B also gets wrong
    page.select_option("select[name=outcome]", "all")
    # B got g0 wrong; A's masked episodes compare with B's first episode of the sample (g0, wrong):
    # A right and B wrong for g0, mask/g0, mask/g2, mask/g3
    page.wait_for_function("document.querySelectorAll('#episode-table tbody tr').length === 4")
    assert page.locator("#episode-table tbody tr").evaluate_all("rs => rs.map(r => r.dataset.episode)") == [
        "s00001/g0", "s00001/mask/g0", "s00001/mask/g2", "s00001/mask/g3"]
    shot(page, "list")
    page.locator("#episode-table tbody tr").first.click()
    page.wait_for_selector("section.panel.episode[data-run=A]")
    assert page.locator("section.panel.episode[data-run=A] h2").inner_text() == "[A] s00001/g0"
    assert page.locator("section.panel.episode[data-run=B] h2").inner_text() == "[B] s00001/g0"  # side by side


def test_episode_timeline_keyboard_and_frames(page, site):
    raw = raws(site["a"])[2]  # g2: think, crop, near-duplicate crop, answer
    page.goto(site["url"] + "#/episode/A/2")
    panel = page.locator("section.panel.episode[data-run=A]")
    panel.locator("svg.timeline").wait_for()
    spans = panel.locator("svg.timeline .call").evaluate_all(
        "els => els.map(e => [Number(e.dataset.n), Number(e.dataset.start), Number(e.dataset.end), e.classList.contains('dup')])")
    calls = [t["call"] for t in raw["turns"] if t["call"]]
    assert spans == [[k + 1, c["start"], c["end"], c["duplicate_of"] is not None] for k, c in enumerate(calls)]
    clue = panel.locator("svg.timeline rect.clue").evaluate_all("els => els.map(e => [Number(e.dataset.start), Number(e.dataset.end)])")
    assert clue == raw["clue_intervals"]
    assert panel.locator("svg.timeline .init-tick").count() == len(raw["initial"]["frames"])
    assert page.locator("#turn-pos").inner_text().startswith("start")
    for k, turn in enumerate(raw["turns"]):
        page.keyboard.press("ArrowRight")
        panel.locator(f".turn[data-turn='{turn['index']}']").wait_for()
        assert page.locator("#turn-pos").inner_text().startswith(f"turn {k}")
        want = turn["observation"]["frames"]
        figures = panel.locator(".turn figure")
        assert figures.count() == len(want)
        srcs = panel.locator(".turn figure img").evaluate_all("els => els.map(e => e.getAttribute('src'))")
        assert srcs == ["/frames/A/" + f["path"] for f in want]
        ticks = panel.locator("svg.timeline .frame-tick").evaluate_all("els => els.map(e => Number(e.dataset.t))")
        assert ticks == [f["t"] for f in want]
        if turn["call"]:
            assert panel.locator("svg.timeline .call.current").evaluate("e => Number(e.dataset.turn)") == turn["index"]
            page.wait_for_function("[...document.querySelectorAll('section[data-run=A] .turn img')].every(i => i.complete && i.naturalWidth > 0)")
        kinds = panel.locator(".assistant span").evaluate_all("els => els.map(e => e.className)")
        assert ("seg-answer" in kinds) == (turn["action"]["type"] == "answer")
    shot(page, "episode")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert page.locator("#turn-pos").inner_text().startswith("turn 1")
    assert "turn=2" in page.url
    panel.locator(".turn figure img").first.click()
    page.wait_for_selector("#lightbox:not([hidden])")
    page.keyboard.press("Escape")
    page.wait_for_selector("#lightbox", state="hidden")
    assert "A=" in panel.locator("table.group").inner_text()
    assert panel.locator("table.group td.current").count() == 1


def test_broken_run_shows_what_is_wrong(page, tmp_path):
    run = tmp_path / "broken"
    write_fixture_run(run, n_samples=1, group_size=2, perturbed=False)
    lines = (run / "trajectories.jsonl").read_text().splitlines()
    gone = json.loads(lines[0])["turns"][0]["observation"]["frames"][0]["path"]
    (run / gone).unlink()
    (run / "trajectories.jsonl").write_text(lines[0] + "\n" + lines[1][:200])
    srv, thread = serve_in_thread(ViewerApp([run]))
    try:
        page.goto(srv.url)
        page.wait_for_selector("#episode-table tr.problem")
        assert "truncated last line" in page.locator("#episode-table tr.problem").inner_text()
        page.goto(srv.url + "#/episode/A/1")
        assert "truncated last line" in page.locator(".issues").inner_text()
        page.goto(srv.url + "#/episode/A/0?turn=1")
        page.wait_for_selector(".frames .missing")
        assert page.locator(".frames .missing").first.inner_text() == "file missing"
        assert f"frame file missing: {gone}" in page.locator(".issues").inner_text()
        page.goto(srv.url + "#/episode/A/7")
        page.wait_for_selector("#page-error")
        assert "no episode 7" in page.locator("#page-error").inner_text()
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_export_opens_from_disk(page, site, tmp_path):
    out = tmp_path / "share.html"
    export_runs([site["a"], site["b"]], out, thumb=64, progress=False)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(out.as_uri())
    page.wait_for_selector("#episode-table tbody tr")
    assert page.locator("#episode-table tbody tr").count() == 16
    page.select_option("select[name=role]", "perturbed")
    page.wait_for_function("document.querySelectorAll('#episode-table tbody tr').length === 8")
    page.locator("#episode-table tbody tr").nth(2).click()
    panel = page.locator("section.panel.episode[data-run=A]")
    panel.locator("svg.timeline rect.masked-range").wait_for()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("[...document.querySelectorAll('section[data-run=A] .turn img')].length > 0 && "
                           "[...document.querySelectorAll('section[data-run=A] .turn img')].every(i => i.src.startsWith('data:image/jpeg') && i.complete && i.naturalWidth > 0)")
    shot(page, "export")
    assert all(u.startswith(("file:", "data:")) for u in requests), [u for u in requests if not u.startswith(("file:", "data:"))]
    assert page.locator("#nav-play").is_hidden()


def test_play_one_episode_to_the_end(page, site):
    page.goto(site["url"] + "#/play")
    page.click("#play-start")
    page.wait_for_selector("#play-episode svg.timeline")
    # the initial frames change the layout as they load: measure the timeline after that
    page.wait_for_function("[...document.querySelectorAll('#play-episode img')].every(i => i.complete && i.naturalWidth > 0)")
    svg = page.locator("#play-episode svg.timeline")
    box = svg.bounding_box()
    view_w = svg.evaluate("e => e.viewBox.baseVal.width")
    end = float(svg.get_attribute("data-end"))
    x_of = lambda t: box["x"] + (78 + t / end * (view_w - 78 - 12)) / view_w * box["width"]
    y = box["y"] + box["height"] / 2
    page.mouse.move(x_of(11.5), y)
    page.mouse.down()
    page.mouse.move(x_of(14.0), y, steps=6)
    page.mouse.up()
    # the drag fills the span of the env's tool that takes one (the page builds a form per tool of info["tools"])
    assert page.locator("#play-tools .play-tool").evaluate_all("els => els.map(e => e.dataset.tool)") == ["crop_video"]
    start, stop = float(page.input_value(CROP_START)), float(page.input_value(CROP_END))
    assert abs(start - 11.5) < 0.2 and abs(stop - 14.0) < 0.2
    page.click(CROP_BUTTON)
    page.wait_for_selector("#play-log .play-turn[data-turn='0'] figure img")
    times = page.locator("#play-log figure").evaluate_all("els => els.map(e => Number(e.dataset.t))")
    assert times and all(start - 0.1 <= t <= stop + 0.1 for t in times)
    assert page.locator("#play-timeline .call").count() == 1
    page.check("#play-show-clues")  # the player asks for the answer key: fetched now, and recorded
    page.wait_for_selector("#play-timeline rect.clue")
    assert "coverage" not in page.locator("#play-status").inner_text().replace("coverage and evidence score are shown once you answer", "")
    page.fill("#play-answer", "B")
    page.click("#play-answer-btn")
    page.wait_for_selector("#play-result")
    assert page.locator("#play-verdict").inner_text() == "correct"
    shot(page, "play")
    page.click("#play-open-saved")
    page.wait_for_selector("section.panel.episode[data-run=play]")
    saved = raws(site["a"] / "play")[-1]
    assert saved["policy"] == "human" and saved["correct"] is True and saved["metrics"]["play"] == {"clues_shown_at_turn": 1}
    assert page.locator("section.panel.episode[data-run=play] h2").inner_text() == f"[play] {saved['episode_id']}"


def test_timeline_zoom_key_frames_and_playback(page, site):
    raw = raws(site["a"])[2]  # g2: think, crop, near-duplicate crop, answer
    k = next(k for k, t in enumerate(raw["turns"]) if t["call"])
    turn = raw["turns"][k]
    page.goto(site["url"] + f"#/episode/A/2?turn={k + 1}")
    panel = page.locator("section.panel.episode[data-run=A]")
    panel.locator(f".turn[data-turn='{turn['index']}']").wait_for()
    # key frames: a thumbnail of each frame the crop returned, under its time
    frames = turn["observation"]["frames"]
    keys = panel.locator("svg.timeline .keyframe").evaluate_all("els => els.map(e => [Number(e.dataset.t), e.querySelector('image').getAttribute('href')])")
    assert keys == [[f["t"], "/frames/A/" + f["path"]] for f in frames]
    width = lambda: panel.locator(f"svg.timeline rect.call[data-turn='{turn['index']}']").evaluate("e => Number(e.getAttribute('width'))")
    whole = width()
    assert panel.locator(".zoom-window").inner_text() == "0.0s – 20.0s"
    panel.locator(".zoom-in").click()
    assert panel.locator(".zoom-window").inner_text() == "5.0s – 15.0s"
    assert width() == pytest.approx(2 * whole, rel=0.02)  # the crop is drawn twice as wide
    svg_box = panel.locator("svg.timeline").bounding_box()
    page.mouse.move(svg_box["x"] + svg_box["width"] * 0.6, svg_box["y"] + 30)
    page.mouse.wheel(0, -100)  # the wheel zooms in around the pointer
    page.wait_for_function("document.querySelector('section[data-run=A] .zoom-window').textContent !== '5.0s – 15.0s'")
    lo, hi = [float(x.rstrip("s")) for x in panel.locator(".zoom-window").inner_text().split(" – ")]
    assert hi - lo == pytest.approx(8.0, abs=0.05) and 5.0 < lo and hi < 15.0
    axis = panel.locator("svg.timeline .axis text").evaluate_all("els => els.map(e => parseFloat(e.textContent))")
    assert axis and all(lo - 1e-6 <= t <= hi + 1e-6 for t in axis)
    panel.locator(".zoom-reset").click()
    assert panel.locator(".zoom-window").inner_text() == "0.0s – 20.0s" and width() == pytest.approx(whole)
    # playback of the crop's frames, with a playhead on the timeline at each frame's time
    player = panel.locator(".player")
    player.locator(".player-speed").select_option("8")
    player.locator(".player-play").click()
    page.wait_for_function(f"(() => {{ const p = document.querySelector('section[data-run=A] .player'); return p.dataset.playing === 'false' && p.dataset.k === '{len(frames) - 1}'; }})()")
    assert player.locator(".player-img").get_attribute("src") == "/frames/A/" + frames[-1]["path"]
    head = panel.locator("svg.timeline .playhead")
    assert head.get_attribute("visibility") == "visible"
    want_x = panel.locator("svg.timeline").evaluate(f"s => s.timeAt({frames[-1]['t']})")
    assert float(head.get_attribute("x1")) == pytest.approx(want_x)
    assert player.locator(".player-caption").inner_text() == f"frame {len(frames)} / {len(frames)} · {frames[-1]['t']:.1f}s"
    shot(page, "timeline-zoom")


def test_compare_view_at_1024_px_keeps_both_runs_side_by_side(browser, site):
    ctx = browser.new_context(viewport={"width": 1024, "height": 900})
    pg = ctx.new_page()
    try:
        pg.goto(site["url"] + "#/episode/A/2?turn=2")
        pg.wait_for_selector("section.panel.episode[data-run=B] svg.timeline")
        a = pg.locator("section.panel.episode[data-run=A]").bounding_box()
        b = pg.locator("section.panel.episode[data-run=B]").bounding_box()
        assert a["y"] == b["y"] and a["x"] + a["width"] <= b["x"]  # side by side, not one under the other
        assert pg.evaluate("document.documentElement.scrollWidth") <= 1024  # nothing sticks out
        for box in pg.locator("svg.curve").evaluate_all("els => els.map(e => e.getBoundingClientRect().width)"):
            assert box <= 360
        for side in ("A", "B"):  # each timeline drawn at its panel's width, inside it
            tl = pg.locator(f"section.panel.episode[data-run={side}] svg.timeline").bounding_box()
            panel = pg.locator(f"section.panel.episode[data-run={side}]").bounding_box()
            assert panel["x"] <= tl["x"] and tl["x"] + tl["width"] <= panel["x"] + panel["width"]
        if SHOTS is not None:
            pg.screenshot(path=str(SHOTS / "compare-1024.png"), full_page=True)
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def play4(tmp_path_factory):
    """Play mode on a 4 fps video: frame times such as 12.25 s, where rounding to 0.1 s is a tie."""
    from videos import write_index_video
    from videoseek.envs.sample import VideoSample

    base = tmp_path_factory.mktemp("play4")
    video = write_index_video(base / "v4.mp4", num_frames=80, fps=4)
    sample = VideoSample(id="p4", video=str(video), question="Which colour flashes?", options=["A. red", "B. green"], answer="B",
                         clue_intervals=[(12.0, 13.5)], metadata={"task_kind": "test"})  # fmt: skip
    data = write_jsonl([sample], base / "samples.jsonl")
    run = base / "run"
    write_fixture_run(run, n_samples=1, group_size=1, perturbed=False)
    srv, thread = serve_in_thread(ViewerApp([run], play=PlayManager(data, run / "play")))
    yield srv.url
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def test_play_hides_the_answer_key_until_the_answer(page, play4):
    page.goto(play4 + "#/play")
    page.click("#play-start")
    page.wait_for_selector("#play-episode svg.timeline")
    status = lambda: page.locator("#play-status").inner_text()
    assert "coverage and evidence score are shown once you answer" in status() and "coverage 0" not in status()
    assert page.locator("#play-timeline rect.clue").count() == 0  # the page does not have them: nothing to draw
    page.fill("#play-think", "the flash is late")
    page.fill(CROP_START, "12")
    page.fill(CROP_END, "14")
    page.click(CROP_BUTTON)
    page.wait_for_selector("#play-log .play-turn[data-turn='0'] figure img")
    # no coverage, no evidence score, no gain colour or gain in the tooltip while playing
    assert "coverage 1" not in status() and "evidence score 0" not in status()
    call = page.locator("#play-timeline rect.call")
    assert call.get_attribute("fill") == "#dbeafe" and "gain" not in call.locator("title").text_content()
    assert page.input_value("#play-think") == ""  # the reasoning box is cleared for the next turn
    assert page.locator("#play-log .assistant").first.inner_text().startswith("<think>the flash is late</think>")
    # frame captions use the env's own timestamps, written as the env writes them (`format_seconds`)
    text = page.locator("#play-log .play-turn[data-turn='0'] .observation").inner_text()
    listed = text.split(" at ", 1)[1].rstrip(".").split(", ")
    captions = page.locator("#play-log .play-turn[data-turn='0'] figcaption").all_inner_texts()
    assert captions == listed and "12.25s" in captions
    # a crop past the end is rejected; its label stays inside the timeline
    page.locator("#play-episode details summary").click()
    page.fill("#play-raw", '<tool_call>{"name": "crop_video", "arguments": {"start": 25, "end": 30}}</tool_call>')
    page.click("#play-raw-btn")
    page.wait_for_selector("#play-log .play-turn[data-turn='1'] .turn-error")
    label = page.locator("#play-timeline svg.timeline text.call-label").last
    assert "lies outside the video" in label.text_content()
    right = label.evaluate("e => e.getBBox().x + e.getBBox().width")
    assert right <= page.locator("#play-timeline svg.timeline").evaluate("s => s.viewBox.baseVal.width")
    assert label.evaluate("e => e.getBBox().x") >= 0
    page.fill("#play-answer", "B")
    page.click("#play-answer-btn")
    page.wait_for_selector("#play-result")
    assert "coverage 1.00" in status() and "evidence score" in status()  # shown once answered
    page.check("#play-show-clues")
    page.wait_for_selector("#play-timeline rect.clue")  # the clue intervals came with the answer
    assert call.get_attribute("fill") != "#dbeafe" and "gain 0." in call.locator("title").text_content()
    shot(page, "play-answered")


def test_folder_of_runs_lists_them_to_open_or_compare(page, site):
    srv, thread = serve_in_thread(ViewerApp([site["base"]]))
    try:
        page.goto(srv.url)
        page.wait_for_selector("#runs-table")
        assert page.locator("#runs-table tr[data-run]").evaluate_all("rs => rs.map(r => r.dataset.run)") == ["run_a", "run_b"]
        assert "16 episodes" in page.locator("#runs-table tr[data-run=run_a]").inner_text()
        shot(page, "runs")
        page.locator("#runs-table tr[data-run=run_b] .run-open").click()
        page.wait_for_selector("#episode-table tbody tr")
        assert page.locator("#episode-table tbody tr").count() == len(raws(site["b"]))
        assert page.locator("#run-info").inner_text().endswith("run_b")
        page.click("#nav-runs")
        page.wait_for_selector("#runs-table")
        assert page.locator("#runs-compare").is_disabled()
        page.check("#runs-table tr[data-run=run_a] input[name=run-a]")
        page.check("#runs-table tr[data-run=run_b] input[name=run-b]")
        page.click("#runs-compare")
        page.wait_for_selector("#episode-table tbody tr")
        assert page.locator("select[name=versus]").count() == 1  # the A vs B filter of a two-run view
        page.locator("#episode-table tbody tr").first.click()
        page.wait_for_selector("section.panel.episode[data-run=B]")
        assert page.locator("section.panel.episode[data-run=A] h2").inner_text() == "[A] s00000/g0"
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
