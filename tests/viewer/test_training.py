"""The viewer's training view over a real local GRPO run (tiny model, DM-GRPO, probes, tokens).

One module-scoped run of `training/run_csgrpo.py --backend local` (2 steps, G = 3, 2 questions,
probes every step, `--record-tokens`, about 20 s on 2 cores) feeds the server tests and the
headless-Chromium tests: metrics per step, the step slider, groups with their mean / std /
advantages, the token view, the probe grid and side-by-side view, run comparison with A - B
deltas, and the reward panel's weights and gates (DM-GRPO's format gate).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("verl")

from videoseek.envs.sample import VideoSample, write_jsonl  # noqa: E402
from videoseek.rewards import RewardConfig  # noqa: E402
from videoseek.training import run_csgrpo  # noqa: E402
from videoseek.viewer.fixtures import write_compare_runs  # noqa: E402
from videoseek.viewer.rewardinfo import explain_reward  # noqa: E402
from videoseek.viewer.server import ViewerApp, serve_in_thread  # noqa: E402
from videoseek.viewer.training import read_metrics  # noqa: E402

FAST = {
    "max_turn_tokens": 24, "group_size": 3, "batch_size": 2,
    "env": {"initial_frames": 2, "frames_per_call": 2, "max_turns": 2, "max_total_frames": 8, "max_pixels": 112 * 112},
}  # fmt: skip
from browser_support import CHROMIUM, CHROMIUM_ARGS  # noqa: E402


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def train_run(tmp_path_factory, index_video, single_thread_torch):
    """A real 2-step DM-GRPO run of the tiny model with probes every step and per-token records."""
    from videoseek.agents.tiny_model import ensure_tiny_model

    base = tmp_path_factory.mktemp("train")
    samples = [
        VideoSample(id=f"q{k}", video=str(index_video), question=f"Which colour flashes, clip {k}?", options=["A. red", "B. green", "C. blue"],
                    answer="B", clue_intervals=[(12.0, 13.5)], mask_patterns=[{"time_range": (12.0, 13.5), "oracle_correct": False}],
                    metadata={"task_kind": "test"})
        for k in range(3)
    ]  # fmt: skip
    data = write_jsonl(samples, base / "samples.jsonl")
    config = base / "fast.yaml"
    config.write_text(yaml.safe_dump(FAST))
    out = base / "run"
    model = ensure_tiny_model(cache_dir=base / "models")
    argv = ["--backend", "local", "--model", str(model), "--data", str(data), "--config", str(config), "--steps", "2", "--reward", "dmgrpo",
            "--out", str(out), "--probe-every", "1", "--probe-n", "2", "--record-tokens", "--threads", "1"]  # fmt: skip
    assert run_csgrpo.main(argv) == 0
    return out


@pytest.fixture(scope="module")
def app(train_run):
    return ViewerApp([train_run])


# ---- what training writes ------------------------------------------------------------------------
def test_each_step_records_groups_advantages_and_tokens(train_run):
    metrics = jsonl(train_run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        for key in ("reward/accuracy", "reward/timestamp", "reward/delta_mask", "reward/ref_delta_format", "kl", "entropy"):
            assert math.isfinite(m[key]), key
    for m in metrics:
        folder = train_run / "rollouts" / f"step_{m['step']:04d}"
        grpo = json.loads((folder / "grpo.json").read_text())
        assert grpo["reward_config"]["preset"] == "dmgrpo" and grpo["step"] == m["step"]
        trajs = {t["episode_id"]: t for t in jsonl(folder / "trajectories.jsonl")}
        assert len(grpo["episodes"]) == m["episodes"] == 6  # 2 questions x G=3 origin episodes (masked ones are not trained)
        assert sum(e["tokens"]["assistant"] for e in grpo["episodes"]) == m["policy_tokens"]
        groups = {g["id"]: g for g in grpo["groups"]}
        for e in grpo["episodes"]:
            assert e["reward"] == trajs[e["episode_id"]]["reward"]
            rewards = groups[e["group_id"]]["rewards"]
            mean = sum(rewards) / len(rewards)
            std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
            assert e["group_mean"] == pytest.approx(mean) and e["group_std"] == pytest.approx(std)
            assert e["advantage"] == pytest.approx((e["reward"] - mean) / (std + 1e-6), abs=1e-4)  # the update's own number
            assert sum(s["n"] for s in e["segments"]) == e["tokens"]["total"]
        tokens = {t["episode_id"]: t for t in jsonl(folder / "tokens.jsonl")}
        assert set(tokens) == {e["episode_id"] for e in grpo["episodes"]}
        for e in grpo["episodes"]:
            segs = tokens[e["episode_id"]]["segments"]
            assert [(s["kind"], s["n"]) for s in segs] == [(s["kind"], s["n"]) for s in e["segments"]]
            assistant = [s for s in segs if s["kind"] == "assistant"]
            assert sum(len(s["pieces"]) for s in assistant) == e["tokens"]["assistant"]
            for s in assistant:
                assert len(s["logprobs"]) == len(s["pieces"]) == len(s["ref_logprobs"]) == len(s["entropy"])
                assert all(lp <= 0 for lp in s["logprobs"])
            if m["step"] == 1:  # before any update the policy is the reference
                assert all(s["logprobs"] == s["ref_logprobs"] for s in assistant)
    manifest = json.loads((train_run / "run.json").read_text())
    assert manifest["env"]["reward"]["preset"] == "dmgrpo" and manifest["probes"] == {"every": 1, "n": 2, "data": None}


def test_probes_are_the_same_questions_greedy_at_every_probe_step(train_run):
    folders = sorted(p.name for p in (train_run / "probes").iterdir())
    assert folders == ["step_0000", "step_0001", "step_0002"]
    for name in folders:
        origin = [t for t in jsonl(train_run / "probes" / name / "trajectories.jsonl") if t["group"]["role"] == "origin"]
        assert sorted(t["sample_id"] for t in origin) == ["q0", "q1"]  # the first --probe-n samples, one greedy episode each


def test_probes_and_records_leave_training_numbers_unchanged(tmp_path, train_run):
    """The same run without --probe-every and --record-tokens trains to the same metrics (timings aside)."""
    manifest = json.loads((train_run / "run.json").read_text())
    out = tmp_path / "plain"
    from videoseek.agents.tiny_model import ensure_tiny_model

    model = ensure_tiny_model(cache_dir=train_run.parent / "models")  # the fixture's model, from its cache
    argv = ["--backend", "local", "--model", str(model), "--data", manifest["data"][0],
            "--config", str(train_run.parent / "fast.yaml"), "--steps", "2", "--reward", "dmgrpo", "--out", str(out), "--threads", "1"]  # fmt: skip
    assert run_csgrpo.main(argv) == 0
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    assert strip(jsonl(out / "metrics.jsonl")) == strip(jsonl(train_run / "metrics.jsonl"))
    assert not (out / "probes").exists() and not (out / "rollouts" / "step_0001" / "tokens.jsonl").exists()
    assert (out / "rollouts" / "step_0001" / "grpo.json").is_file()


def test_verl_backend_maps_probes_onto_its_validation(tmp_path, train_run):
    data = json.loads((train_run / "run.json").read_text())["data"][0]
    from videoseek.agents.tiny_model import ensure_tiny_model

    out = tmp_path / "verl"
    argv = ["--dry-run", "--data", data, "--model", str(ensure_tiny_model(cache_dir=tmp_path / "m")), "--out", str(out), "--batch-size", "1",
            "--probe-every", "3", "--probe-n", "1"]  # fmt: skip
    assert run_csgrpo.main(argv) == 0
    cfg = yaml.safe_load((out / "verl_config.yaml").read_text())
    assert cfg["trainer"]["test_freq"] == 3 and cfg["trainer"]["val_before_train"] is True
    assert cfg["trainer"]["validation_data_dir"] == str((out / "probes").resolve())
    assert cfg["data"]["val_files"] == [str((out / "data" / "probe.parquet").resolve())]
    assert cfg["actor_rollout_ref"]["rollout"]["val_kwargs"]["do_sample"] is False  # verl validates greedily


# ---- the server's answers --------------------------------------------------------------------------
def test_training_endpoint_metrics_steps_and_probe_grid(app, train_run):
    data = app.api_training({"run": ["A"]})
    metrics = jsonl(train_run / "metrics.jsonl")
    assert [r["step"] for r in data["metrics"]] == [1, 2]
    assert [r["kl"] for r in data["metrics"]] == [m["kl"] for m in metrics]
    assert data["series"][:4] == ["reward", "accuracy", "kl", "entropy"] and "reward/delta_mask" in data["series"]
    assert data["steps"] == [1, 2] and data["probe_steps"] == [0, 1, 2] and data["problems"] == []
    assert data["reward"]["preset"] == "dmgrpo" and data["reward"]["gate"] == 0.4
    assert [q["sample_id"] for q in data["probes"]] == ["q0", "q1"]
    assert all(sorted(q["cells"]) == ["0", "1", "2"] for q in data["probes"])


def test_step_groups_and_tokens_come_from_what_the_update_used(app, train_run):
    grpo = json.loads((train_run / "rollouts" / "step_0002" / "grpo.json").read_text())
    step = app.api_step({"run": ["A"], "step": ["2"]})
    assert step["grpo"] is True and step["tokens"] is True and step["metrics"]["step"] == 2
    recorded = {g["id"]: g for g in grpo["groups"]}
    by_id = {e["episode_id"]: e for e in grpo["episodes"]}
    assert {g["id"] for g in step["groups"]} == set(recorded)
    for g in step["groups"]:
        assert g["mean"] == pytest.approx(recorded[g["id"]]["mean"]) and g["stats_from"] == "grpo.json"
        assert len(g["rollouts"]) == 3 and len(g["perturbed"]) == 3  # DM-GRPO's masked group, G~ = G
        for r in g["rollouts"]:
            assert r["advantage"] == by_id[r["episode_id"]]["advantage"] and r["tokens"] == by_id[r["episode_id"]]["tokens"]
    first = grpo["episodes"][0]
    tokens = app.api_tokens({"run": ["A@s2"], "id": [first["episode_id"]]})
    assert tokens["recorded"] and tokens["advantage"] == first["advantage"] and tokens["counts"] == first["tokens"]
    assert [(s["kind"], s["n"]) for s in tokens["segments"]] == [(s["kind"], s["n"]) for s in first["segments"]]
    with pytest.raises(ValueError, match="no rollouts for step 7"):
        app.api_step({"run": ["A"], "step": ["7"]})


def test_reward_panel_explains_every_total_with_weights_and_gates(app, train_run):
    config = RewardConfig(preset="dmgrpo")
    checked = 0
    for step in (1, 2):
        for i, raw in enumerate(jsonl(train_run / "rollouts" / f"step_{step:04d}" / "trajectories.jsonl")):
            ex = app.api_episode({"run": [f"A@s{step}"], "i": [str(i)]})["episode"]["reward_explained"]
            assert ex["known"] and ex["preset"] == "dmgrpo" and ex["source"] == str(train_run / "run.json")  # the run record
            weights = {r["name"]: r["weight"] for r in ex["rows"]}
            assert weights == {k: config.merged_weights().get(k, 0.0) for k in weights}  # reported-only components weigh 0
            assert ex["sum"] == pytest.approx(sum(r["weight"] * raw["reward_components"][r["name"]] for r in ex["rows"] if r["present"]))
            if raw["group"]["role"] == "origin":
                assert ex["matches"] is True and ex["sum"] == pytest.approx(raw["reward"])
            gated = [r for r in ex["rows"] if r["gate"]]
            assert {r["name"] for r in gated} <= {"timestamp", "delta_mask"} and gated
            for r in gated:
                assert r["gate"]["open"] == (raw["reward_components"]["ref_delta_format"] >= 0.4)
                if not r["gate"]["open"] and r["present"]:  # (a masked episode has no delta_mask: it is group-level)
                    assert r["value"] == 0.0  # a closed gate zeroes the component, and the panel says why
            checked += 1
    assert checked >= 24


def test_explain_reward_open_and_closed_gate_and_unknown_config():
    config = RewardConfig(preset="dmgrpo")
    comps = {"accuracy": 1.0, "ref_delta_format": 0.6, "timestamp": 0.5, "delta_mask": 0.3}
    ex = explain_reward(comps, 1.0 + 0.2 * 0.5 + 0.3, config, "run.json")
    assert ex["matches"] and ex["sum"] == pytest.approx(1.4)
    rows = {r["name"]: r for r in ex["rows"]}
    assert rows["timestamp"]["gate"]["open"] is True and rows["timestamp"]["contribution"] == pytest.approx(0.1)
    assert rows["ref_delta_format"]["weight"] == 0 and rows["ref_delta_format"]["gates"] == ["timestamp", "delta_mask"]
    closed = explain_reward({**comps, "ref_delta_format": 0.2, "timestamp": 0.0, "delta_mask": 0.0}, 1.0, config, "run.json")
    assert all(r["gate"]["open"] is False for r in closed["rows"] if r["gate"]) and closed["matches"]
    wrong = explain_reward(comps, 2.0, config, "run.json")
    assert wrong["matches"] is False  # a total the weights do not explain is flagged, not hidden
    assert explain_reward(comps, 1.0, None, "", "no reward config found")["known"] is False


def test_a_truncated_metrics_line_is_reported_with_file_and_line(tmp_path, train_run):
    run = tmp_path / "copy"
    shutil.copytree(train_run, run, ignore=shutil.ignore_patterns("checkpoint", "frames"))
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text(lines[0] + "\n" + "{not json\n" + "[1, 2]\n" + lines[1][:40])
    rows, problems = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1]
    assert problems == ["metrics.jsonl line 2: invalid JSON (Expecting property name enclosed in double quotes)",
                        "metrics.jsonl line 3: expected a JSON object, got list",
                        "metrics.jsonl line 4: truncated last line (40 bytes without a newline)"]  # fmt: skip
    data = ViewerApp([run]).api_training({"run": ["A"]})
    assert data["problems"] == problems and data["steps"] == [1, 2]


def test_steps_without_tokens_or_with_a_broken_grpo_json_still_show(tmp_path, train_run):
    run = tmp_path / "copy"
    shutil.copytree(train_run, run, ignore=shutil.ignore_patterns("checkpoint", "frames"))
    (run / "rollouts" / "step_0001" / "tokens.jsonl").unlink()
    (run / "rollouts" / "step_0002" / "grpo.json").write_text('{"step": 2, "groups": [')
    app = ViewerApp([run])
    one = app.api_step({"run": ["A"], "step": ["1"]})
    assert one["grpo"] is True and one["tokens"] is False
    episode = one["groups"][0]["rollouts"][0]["episode_id"]
    tokens = app.api_tokens({"run": ["A@s1"], "id": [episode]})
    assert tokens["recorded"] is False and "--record-tokens" in tokens["note"]
    assert sum(s["n"] for s in tokens["segments"]) == tokens["counts"]["total"]  # the mask from grpo.json is still drawn
    two = app.api_step({"run": ["A"], "step": ["2"]})
    assert two["grpo"] is False and two["problems"] == ["rollouts/step_0002/grpo.json: invalid JSON (Expecting value at line 1 column 24)"]
    trajs = [t for t in jsonl(run / "rollouts" / "step_0002" / "trajectories.jsonl") if t["group"]["role"] == "origin"]
    for g in two["groups"]:
        rewards = [t["reward"] for t in trajs if t["group"]["id"] == g["id"]]
        mean = sum(rewards) / len(rewards)
        assert g["stats_from"] == "trajectories" and g["mean"] == pytest.approx(mean)
        assert g["std"] == pytest.approx(math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1)))
        assert [r["advantage"] for r in g["rollouts"]] == [t["advantage"] for t in trajs if t["group"]["id"] == g["id"]]


def test_compare_aggregates_and_deltas_per_run_and_question(tmp_path):
    run_a, run_b = write_compare_runs(tmp_path)
    c = ViewerApp([run_a, run_b]).api_compare({"a": ["A"], "b": ["B"]})
    a = [t for t in jsonl(run_a / "trajectories.jsonl") if t["group"]["role"] == "origin"]
    b = jsonl(run_b / "trajectories.jsonl")
    acc = lambda ts: sum(t["correct"] is True for t in ts) / len(ts)  # noqa: E731
    mean = lambda ts, k: sum(t[k] for t in ts) / len(ts)  # noqa: E731
    assert c["runs"]["A"]["episodes"] == len(a) and c["runs"]["B"]["episodes"] == len(b)
    assert c["runs"]["A"]["accuracy"] == pytest.approx(acc(a)) and c["runs"]["B"]["accuracy"] == pytest.approx(acc(b))
    assert c["delta"]["accuracy"] == pytest.approx(acc(a) - acc(b)) and c["delta"]["accuracy"] > 0  # B's g0 answers are wrong
    assert c["delta"]["reward"] == pytest.approx(mean(a, "reward") - mean(b, "reward"))
    assert c["runs"]["A"]["components"]["clue_seek"] == pytest.approx(sum(t["reward_components"]["clue_seek"] for t in a) / len(a))
    for q in c["questions"]:
        qa = [t for t in a if t["sample_id"] == q["sample_id"]]
        qb = [t for t in b if t["sample_id"] == q["sample_id"]]
        assert q["d_accuracy"] == pytest.approx(acc(qa) - acc(qb)) and q["d_reward"] == pytest.approx(mean(qa, "reward") - mean(qb, "reward"))
    assert c["paired"]["questions"] == 2


# ---- in the browser ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    from browser_support import sync_api_or_skip

    sync_api = sync_api_or_skip()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(app):
    srv, thread = serve_in_thread(app)
    yield srv.url
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def test_browser_training_page_charts_slider_groups_tokens(page, site, train_run):
    metrics = jsonl(train_run / "metrics.jsonl")
    page.goto(site)  # a training run opens on its training page
    page.wait_for_selector("#step-view[data-step='2']")
    for name in ("reward", "accuracy", "kl", "entropy"):
        values = page.locator(f"svg.chart[data-title='{name}'] circle").evaluate_all("els => els.map(e => [Number(e.dataset.step), Number(e.dataset.value)])")
        assert values == [[m["step"], pytest.approx(m[name])] for m in metrics], name
    comps = page.locator("svg.chart[data-title^='reward components'] circle").evaluate_all("els => [...new Set(els.map(e => e.dataset.series))]")
    assert {"accuracy", "timestamp", "delta_mask"} <= set(comps)
    pushes = page.locator("svg.chart[data-title^='push on tool calls'] circle").evaluate_all("els => els.map(e => [e.dataset.series, Number(e.dataset.step), Number(e.dataset.value)])")
    want = [[k[len("push/calls/"):], m["step"], pytest.approx(m[k])] for k in metrics[0] if k.startswith("push/calls/") for m in metrics if k in m]
    assert {"accuracy", "delta_mask"} <= {p[0] for p in pushes} and sorted(pushes) == sorted(want)
    page.locator("#step-slider").fill("1")  # the slider jumps to step 1's groups
    page.wait_for_selector("#step-view[data-step='1']")
    assert "step=1" in page.url
    grpo = json.loads((train_run / "rollouts" / "step_0001" / "grpo.json").read_text())
    groups = page.locator("#groups-table tr[data-group]").evaluate_all("rs => rs.map(r => r.dataset.group)")
    assert sorted(groups) == sorted(g["id"] for g in grpo["groups"])
    page.locator("svg.chart[data-title='reward'] circle[data-step='2']").click()  # a chart point selects its step
    page.wait_for_selector("#step-view[data-step='2']")
    page.locator("#step-slider").fill("1")
    page.wait_for_selector("#step-view[data-step='1']")

    gid = grpo["groups"][0]["id"]
    page.locator(f"#groups-table tr[data-group='{gid}'] a.group-link").click()
    page.wait_for_selector("#group-view")
    want = {e["episode_id"]: e for e in grpo["episodes"] if e["group_id"] == gid}
    shown = page.locator("#group-rollouts tr[data-episode]").evaluate_all("rs => rs.map(r => [r.dataset.episode, Number(r.dataset.reward), Number(r.dataset.advantage)])")
    assert sorted(shown) == sorted([k, pytest.approx(e["reward"]), pytest.approx(e["advantage"])] for k, e in want.items())
    assert page.locator("#group-mean").inner_text() == f"{grpo['groups'][0]['mean']:.4f}"
    assert page.locator("#group-std").inner_text() == f"{grpo['groups'][0]['std']:.4f}"

    first = sorted(want)[0]
    page.locator(f"#group-rollouts tr[data-episode='{first}'] a.tokens-link").click()
    page.wait_for_selector("#token-view")
    row = next(t for t in jsonl(train_run / "rollouts" / "step_0001" / "tokens.jsonl") if t["episode_id"] == first)
    kinds = page.locator("#mask-bar span").evaluate_all("els => els.map(e => e.dataset.kind)")
    assert kinds == [s["kind"] for s in row["segments"]]
    logprobs = page.locator("#token-segments .tok").evaluate_all("els => els.map(e => Number(e.dataset.logprob))")
    assert logprobs == [pytest.approx(v) for s in row["segments"] if s["kind"] == "assistant" for v in s["logprobs"]]
    assert page.locator("#token-counts td[data-key=assistant]").inner_text() == str(want[first]["tokens"]["assistant"])


def test_browser_probes_grid_side_by_side_and_step_compare(page, site, train_run):
    page.goto(site + "#/training/A")
    page.wait_for_selector("#probe-grid tr[data-sample]")
    assert page.locator("#probe-grid tr[data-sample]").evaluate_all("rs => rs.map(r => r.dataset.sample)") == ["q0", "q1"]
    assert page.locator("#probe-grid tr[data-sample='q0'] td[data-step]").count() == 3
    page.locator("#probe-grid tr[data-sample='q1'] a.probe-link").click()
    page.wait_for_selector("#probe-view[data-sample='q1']")
    assert page.locator("#probe-cards .probe-card").evaluate_all("els => els.map(e => Number(e.dataset.step))") == [0, 1, 2]
    for step in (0, 1, 2):
        raw = next(t for t in jsonl(train_run / "probes" / f"step_{step:04d}" / "trajectories.jsonl") if t["sample_id"] == "q1" and t["group"]["role"] == "origin")
        card = page.locator(f"#probe-cards .probe-card[data-step='{step}']")
        assert card.get_attribute("data-correct") == str(raw["correct"]).lower()
        assert card.locator(".probe-turn").count() == len(raw["turns"])
    page.goto(site + "#/training/A")
    page.wait_for_selector("#probe-compare")
    page.click("#probe-compare")
    page.wait_for_selector("#compare-view")
    assert page.locator("#compare-view h2").inner_text() == "Compare A@p2 − A@p0"
    assert page.locator("#compare-questions tr[data-sample]").count() == 2


def test_browser_reward_panel_shows_weight_and_gate_per_component(page, site, train_run):
    raws = jsonl(train_run / "rollouts" / "step_0001" / "trajectories.jsonl")
    i = next(k for k, t in enumerate(raws) if t["group"]["role"] == "origin")
    page.goto(site + f"#/episode/A@s1/{i}")
    table = page.locator("table.rewards.explained")
    table.wait_for()
    assert table.get_attribute("data-preset") == "dmgrpo"
    rows = table.locator("tr[data-component]").evaluate_all("rs => rs.map(r => [r.dataset.component, Number(r.dataset.weight), Number(r.dataset.contribution)])")
    weights = RewardConfig(preset="dmgrpo").merged_weights()
    comps = raws[i]["reward_components"]
    assert [r[0] for r in rows] == list(comps)
    for name, w, contribution in rows:
        assert w == weights.get(name, 0.0) and contribution == pytest.approx(w * comps[name])
    assert float(table.locator(".reward-sum").inner_text()) == pytest.approx(raws[i]["reward"], abs=1e-3)
    assert page.locator("#reward-check").inner_text() == "= Σ"
    state = "open" if comps["ref_delta_format"] >= 0.4 else "closed"
    assert table.locator("td.gate[data-gate]").evaluate_all("els => els.map(e => e.dataset.gate)") == [state, state]


def test_browser_compare_two_runs_overall_and_per_question(page, tmp_path):
    run_a, run_b = write_compare_runs(tmp_path)
    app = ViewerApp([run_a, run_b])
    expected = app.api_compare({"a": ["A"], "b": ["B"]})
    srv, thread = serve_in_thread(app)
    try:
        page.goto(srv.url + "#/compare")
        page.wait_for_selector("#compare-overall")
        cell = page.locator("#compare-overall tr[data-metric=accuracy] td.delta").inner_text()
        assert cell == f"+{expected['delta']['accuracy']:.3f}"
        shown = page.locator("#compare-questions tr[data-sample]").evaluate_all("rs => rs.map(r => [r.dataset.sample, r.querySelector('td.delta:last-child').textContent])")
        assert sorted(shown) == sorted([q["sample_id"], f"{q['d_reward']:+.3f}"] for q in expected["questions"])
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_browser_truncated_metrics_names_file_and_line(page, tmp_path, train_run):
    run = tmp_path / "copy"
    shutil.copytree(train_run, run, ignore=shutil.ignore_patterns("checkpoint"))
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text(lines[0] + "\n" + lines[1][:30])
    srv, thread = serve_in_thread(ViewerApp([run]))
    try:
        page.goto(srv.url)
        page.wait_for_selector("#training-problems")
        assert page.locator("#training-problems").inner_text() == "metrics.jsonl line 2: truncated last line (30 bytes without a newline)"
        assert page.locator("svg.chart[data-title='reward'] circle").count() == 1  # the good line is still drawn
        page.wait_for_selector("#step-view[data-step='2']")  # the step's rollouts are there even without its metrics line
        assert "no line in metrics.jsonl" in page.locator("#step-view").inner_text()
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def test_a_folder_of_training_runs_picks_and_compares_them(tmp_path, train_run):
    parent = tmp_path / "runs"
    for name in ("first", "second"):
        shutil.copytree(train_run, parent / name)
    app = ViewerApp([parent])
    listed = app.api_runs()["parent"]["runs"]
    assert [(r["name"], r["training"], r["steps"]) for r in listed] == [("first", True, 2), ("second", True, 2)]
    both = app.select({"a": "first", "b": "second"})
    assert [(r["training"], r["last_step"]) for r in both["runs"][:2]] == [(True, 2), (True, 2)]
    c = app.api_compare({"a": ["A@s2"], "b": ["B@s2"]})  # where the page's "compare A with B" goes for two training runs
    assert c["runs"]["A@s2"]["episodes"] == c["runs"]["B@s2"]["episodes"] > 0 and c["paired"]["d_reward"] == 0
    assert app.api_training({"run": ["B"]})["path"] == str((parent / "second").resolve())
