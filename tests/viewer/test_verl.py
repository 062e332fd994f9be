"""verl's rollout dumps (`trainer.rollout_data_dir`) in the viewer, written by verl's own dump code.

The dumps come from verl 0.9.1 itself, on real episodes: `VideoSeekAgentLoop` inside verl's
`AgentLoopWorker` (the legacy trainer's worker) or `AgentLoopWorkerTQ` with the v1 trainer's step
(the emulation of vLLM, Ray and TransferQueue is `verl_harness.py`'s), scored by verl's reward
path with our `compute_score`, then `RayPPOTrainer._log_rollout_data` / the v1 trainer's
`_log_rollout_data`, the functions `fit()` calls, write the JSONL files the viewer reads.
"""

from __future__ import annotations

import json
import types

import pytest

pytest.importorskip("verl")

from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.reward import extract_reward
from verl_harness import ANSWER, CROP, make_config
from videoseek.viewer.server import ViewerApp

from verl_harness import exported, index_sample_module, run_worker, scripted, tiny_model  # noqa: F401 - fixtures

WRONG = "<think>No need to look.</think><answer>A</answer>"


def legacy_dump(cfg, out, tokenizer, step):
    """`RayPPOTrainer._log_rollout_data` on the worker's batch, as `fit()` calls it after an update."""
    out.batch["token_level_scores"] = out.batch["rm_scores"]  # fit(): batch.batch["token_level_scores"] = reward_tensor
    _, extra = extract_reward(out)
    trainer = types.SimpleNamespace(tokenizer=tokenizer, global_steps=step)
    for name in ("_dump_generations", "_init_dump_executor", "_shutdown_dump_executor"):
        setattr(trainer, name, types.MethodType(getattr(RayPPOTrainer, name), trainer))
    trainer._write_generations = RayPPOTrainer._write_generations
    trainer._init_dump_executor()
    RayPPOTrainer._log_rollout_data(trainer, out, extra, {}, cfg.trainer.rollout_data_dir)
    trainer._shutdown_dump_executor()


@pytest.fixture(scope="module")
def legacy_run(tmp_path_factory, tiny_model, exported):  # noqa: F811
    tmp = tmp_path_factory.mktemp("verl-legacy")
    cfg = make_config(tmp, tiny_model, exported, overrides={"trainer.use_v1": False})
    worker, out = run_worker(cfg, scripted(tiny_model, [CROP, ANSWER]), n=2)
    legacy_dump(cfg, out, worker.tokenizer, step=3)
    return tmp / "run", out


def test_legacy_dump_lines_carry_the_episode_and_rebuild_it(legacy_run, index_sample_module):  # noqa: F811
    run, out = legacy_run
    lines = [json.loads(x) for x in (run / "rollouts" / "3.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and {"input", "output", "gts", "score", "step", "acc", "videoseek_episode"} <= set(lines[0])
    view = json.loads(lines[0]["videoseek_episode"])
    assert view["sample"]["id"] == "idx-1" and view["record"]["calls"] == [[11.5, 14.0]]
    assert not (run / "rollouts" / "videoseek").exists()  # the legacy dump carries the episode: the agent loop writes none

    app = ViewerApp([run])
    assert app.api_runs()["runs"][0] == {**app.api_runs()["runs"][0], "training": True, "steps": 1}
    training = app.api_training({"run": ["A"]})
    assert training["steps"] == [3] and training["problems"] == []
    # verl logs its metrics to the console: the curves are the means over each step's dump
    assert training["metrics_source"].startswith("verl's rollout dumps")
    (row,) = training["metrics"]
    assert row["step"] == 3 and row["accuracy"] == 1.0 and row["calls"] == 1.0 and row["coverage"] == pytest.approx(1.0)
    assert row["reward"] == pytest.approx(sum(float(s) for s in out.non_tensor_batch["score"]) / 2)
    assert row["reward/accuracy"] == 1.0
    step = app.api_step({"run": ["A"], "step": ["3"]})
    assert step["problems"] == [] and step["grpo"] is False
    (group,) = step["groups"]
    assert group["n"] == 2 and [r["correct"] for r in group["rollouts"]] == [True, True]
    assert [r["reward"] for r in group["rollouts"]] == pytest.approx([float(s) for s in out.non_tensor_batch["score"]])

    ep = app.api_episode({"run": ["A@s3"], "i": ["0"]})["episode"]
    record = out.non_tensor_batch["videoseek"][0]
    assert ep["question"] == index_sample_module.question and ep["answer"] == "B" and ep["prediction"] == "B"
    assert ep["clue_intervals"] == [[12.0, 13.5]]
    assert [(c["tool"], c["start"], c["end"], c["rejected"]) for c in ep["calls"]] == [("crop_video", 11.5, 14.0, False)]
    assert ep["calls"][0]["gain"] == pytest.approx(record["evidence"]["score"])  # the env's evidence state, replayed
    assert ep["schema_version"] == 2 and ep["issues"] == []
    assert ep["turns"][-1]["evidence"]["coverage"] == pytest.approx(record["evidence"]["coverage"])
    assert ep["reward_components"] == pytest.approx(record["reward_components"])
    explained = ep["reward_explained"]
    assert explained["known"] and explained["source"].endswith("run.json")  # the run record, not the cache folder's
    assert explained["matches"] is True
    app.close()


def test_a_broken_or_truncated_dump_line_is_named_by_file_and_line(legacy_run, tmp_path):
    run, _ = legacy_run
    copy = tmp_path / "run"
    (copy / "rollouts").mkdir(parents=True)
    good = (run / "rollouts" / "3.jsonl").read_text().splitlines()
    (copy / "rollouts" / "5.jsonl").write_text(good[0] + "\n{not json\n" + '{"x": 1}\n' + good[1][:40])
    app = ViewerApp([copy])
    step = app.api_step({"run": ["A"], "step": ["5"]})
    assert step["problems"] == [
        "rollouts/5.jsonl line 2: invalid JSON (Expecting property name enclosed in double quotes at column 2)",
        "rollouts/5.jsonl line 3: not a verl dump line (no 'output')",
        "rollouts/5.jsonl line 4: truncated last line (40 bytes without a newline)",
    ]
    assert [r["correct"] for g in step["groups"] for r in g["rollouts"]] == [True]
    app.close()


def v1_step(tmp, tiny_model, exported, reward="default"):  # noqa: F811
    """One step of verl's v1 trainer (the default) with `rollout_data_dir`: verl's dump and the agent loop's episodes."""
    pytest.importorskip("transfer_queue")
    import transfer_queue as tq
    from verl.utils.debug import marked_timer
    from verl_harness import InMemoryTransferQueue, V1Run

    with pytest.MonkeyPatch.context() as monkeypatch:
        InMemoryTransferQueue().install(monkeypatch)
        cfg = make_config(tmp, tiny_model, exported, reward=reward, group_size=2, batch_size=1)
        run = V1Run(cfg, tiny_model, scripts=[[CROP, ANSWER], [WRONG]])
        try:
            trainer = run.trainer
            trainer._init_dump_executor()  # what PPOTrainer.__init__ does (the harness builds the trainer without it)
            trainer.global_steps += 1
            metrics, timing = {}, {}
            trainer.timing_raw = timing
            with marked_timer("step", timing):
                batch = trainer.step(metrics, timing)
                trainer.on_step_end()
            trainer._compute_metrics(batch, metrics, timing, global_steps=trainer.global_steps, epoch=0)
            stored = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields", "rm_scores"])
            trainer._log_rollout_data(batch, timing, cfg.trainer.rollout_data_dir)  # fit()'s step 6
            trainer._shutdown_dump_executor()
            tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
        finally:
            run.close()
    records = {key: ef["videoseek"] for key, ef in zip(batch.keys, stored["extra_fields"])}
    return tmp / "run", records


@pytest.fixture(scope="module")
def v1_run(tmp_path_factory, tiny_model, exported):  # noqa: F811
    return v1_step(tmp_path_factory.mktemp("verl-v1"), tiny_model, exported)


def test_v1_training_dump_is_joined_with_the_agent_loops_episodes(v1_run, index_sample_module):  # noqa: F811
    run, records = v1_run
    lines = [json.loads(x) for x in (run / "rollouts" / "1.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and set(lines[0]) == {"input", "output", "gts", "score", "step", "uid"}  # v1 dumps no reward extra keys
    (episode_file,) = (run / "rollouts" / "videoseek").iterdir()
    assert episode_file.name.startswith("1.")  # the prompt's step
    episodes = {e["key"]: e for e in map(json.loads, episode_file.read_text().splitlines())}
    assert set(episodes) == {line["uid"] for line in lines} == set(records)  # one per trajectory, keyed as verl's dump

    app = ViewerApp([run])
    step = app.api_step({"run": ["A"], "step": ["1"]})
    assert step["problems"] == []
    (group,) = step["groups"]
    assert group["n"] == 2 and sorted(r["correct"] for r in group["rollouts"]) == [False, True]
    by_correct = {r["correct"]: r for r in group["rollouts"]}
    right = app.api_episode({"run": ["A@s1"], "i": [str(by_correct[True]["index"])]})["episode"]
    record = next(r for r in records.values() if r["calls"])
    assert right["question"] == index_sample_module.question and right["clue_intervals"] == [[12.0, 13.5]]
    assert [(t["action"]["type"], t["action"].get("name")) for t in right["turns"]] == [("tool_call", "crop_video"), ("answer", None)] and right["prediction"] == "B"
    assert [(c["start"], c["end"], c["rejected"]) for c in right["calls"]] == [(11.5, 14.0, False)]
    assert right["calls"][0]["gain"] == pytest.approx(record["evidence"]["score"])  # the env's evidence state, replayed
    assert right["turns"][-1]["evidence"]["coverage"] == pytest.approx(record["evidence"]["coverage"])
    assert right["reward_components"] == pytest.approx(record["reward_components"])
    assert right["reward"] == pytest.approx(next(x["score"] for x in lines if x["uid"] == next(k for k, r in records.items() if r["calls"])))
    assert right["reward_explained"]["matches"] is True
    # the env's own trajectory: the tool's answers and the first observation are there, not placeholders
    assert right["turns"][0]["observation"]["text"].startswith("crop_video returned")
    assert [f["t"] for f in right["turns"][0]["observation"]["frames"]] and "Which colour flashes?" in right["initial"]["text"]
    wrong = app.api_episode({"run": ["A@s1"], "i": [str(by_correct[False]["index"])]})["episode"]
    assert wrong["prediction"] == "A" and wrong["calls"] == [] and wrong["correct"] is False
    training = app.api_training({"run": ["A"]})
    assert training["metrics"][0]["coverage"] == pytest.approx(sum(r["evidence"]["coverage"] for r in records.values()) / 2)
    app.close()


def test_v1_perturbed_episodes_show_beside_their_group(tmp_path, tiny_model, exported):  # noqa: F811
    """T-GRPO's shuffled group is played by the agent loop and never reaches verl: the viewer shows it from the episode dump."""
    run, records = v1_step(tmp_path, tiny_model, exported, reward="tgrpo")
    assert all(rec["perturbed"] == {"shuffle": 2} for rec in records.values())
    app = ViewerApp([run])
    step = app.api_step({"run": ["A"], "step": ["1"]})
    assert step["problems"] == []
    (group,) = step["groups"]
    assert group["n"] == 2 and len(group["perturbed"]) == 2
    assert {r["episode_id"].rsplit("/", 2)[-2:][0] for r in group["perturbed"]} == {"shuffle"}
    shuffled = app.api_episode({"run": ["A@s1"], "i": [str(group["perturbed"][0]["index"])]})["episode"]
    assert shuffled["group"]["role"] == "perturbed" and shuffled["group"]["perturbation"]["kind"] == "shuffle"
    assert shuffled["turns"] and shuffled["turns"][0]["observation"]["text"]  # its own turns and tool answers
    app.close()


def test_v1_dump_without_the_episode_dump_is_read_from_its_text(v1_run, tmp_path):
    run, _ = v1_run
    copy = tmp_path / "run"
    (copy / "rollouts").mkdir(parents=True)
    (copy / "rollouts" / "1.jsonl").write_bytes((run / "rollouts" / "1.jsonl").read_bytes())  # the episodes left behind
    app = ViewerApp([copy])
    step = app.api_step({"run": ["A"], "step": ["1"]})
    (group,) = step["groups"]
    assert group["n"] == 2 and sorted(r["correct"] for r in group["rollouts"]) == [False, True]
    by_correct = {r["correct"]: r for r in group["rollouts"]}
    right = app.api_episode({"run": ["A@s1"], "i": [str(by_correct[True]["index"])]})["episode"]
    assert [(t["action"]["type"], t["action"].get("name")) for t in right["turns"]] == [("tool_call", "crop_video"), ("answer", None)]
    assert [(c["tool"], c["start"], c["end"]) for c in right["calls"]] == [("crop_video", 11.5, 14.0)]
    assert right["turns"][0]["observation"]["text"].startswith("crop_video returned")  # the tool's answer, from the decoded text
    assert right["prediction"] == "B" and "Which colour flashes?" in right["question"] and right["clue_intervals"] == []
    app.close()


def test_an_episode_dump_of_an_earlier_prompt_step_is_found(v1_run, tmp_path):
    # An off-policy trainer dumps at step 2 the episodes of prompts drawn at step 1.
    run, records = v1_run
    copy = tmp_path / "run"
    (copy / "rollouts" / "videoseek").mkdir(parents=True)
    (copy / "rollouts" / "2.jsonl").write_bytes((run / "rollouts" / "1.jsonl").read_bytes())
    (src,) = (run / "rollouts" / "videoseek").iterdir()
    lines = src.read_text().splitlines()
    (copy / "rollouts" / "videoseek" / src.name).write_text(lines[0] + "\n" + "{torn")  # one episode, then a torn line
    (copy / "rollouts" / "videoseek" / "3.other.jsonl").write_text(lines[1] + "\n")  # a later step's file is not read
    app = ViewerApp([copy])
    rollouts = app.api_step({"run": ["A"], "step": ["2"]})["groups"][0]["rollouts"]
    eps = [app.api_episode({"run": ["A@s2"], "i": [str(r["index"])]})["episode"] for r in rollouts]
    assert sorted(bool(e["clue_intervals"]) for e in eps) == [False, True]  # the one found is whole, the other is text only
    app.close()


@pytest.mark.parametrize("trainer", ["legacy", "v1"])
def test_a_verl_run_in_the_browser_training_group_and_episode(trainer, request):
    from browser_support import CHROMIUM, CHROMIUM_ARGS, sync_api_or_skip

    from videoseek.viewer.server import serve_in_thread

    sync_api = sync_api_or_skip()
    if trainer == "legacy":
        run, out = request.getfixturevalue("legacy_run")
        step, scores = 3, [float(s) for s in out.non_tensor_batch["score"]]
    else:
        run, _ = request.getfixturevalue("v1_run")
        step, scores = 1, [json.loads(x)["score"] for x in (run / "rollouts" / "1.jsonl").read_text().splitlines()]
    app = ViewerApp([run])
    srv, thread = serve_in_thread(app)
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(srv.url)  # a training run opens on its training page
            page.wait_for_selector(f"#step-view[data-step='{step}']")
            assert page.locator("svg.chart[data-title='reward'] circle").count() == 1  # a curve point per dumped step
            assert "verl's rollout dumps" in page.locator("#metrics-source").inner_text()
            assert "no grpo.json" in page.locator("#step-view").inner_text()
            page.locator("#groups-table a.group-link").first.click()
            page.wait_for_selector("#group-view")
            rewards = page.locator("#group-rollouts tr[data-episode]").evaluate_all("rs => rs.map(r => Number(r.dataset.reward))")
            assert sorted(rewards) == pytest.approx(sorted(scores))
            page.locator("#group-rollouts tr[data-episode] a").nth(rewards.index(max(rewards))).click()  # the rollout that crops
            page.wait_for_selector("section.panel.episode svg.timeline")
            spans = page.locator("svg.timeline rect.call").evaluate_all("els => els.map(e => [Number(e.dataset.start), Number(e.dataset.end)])")
            assert spans == [[11.5, 14.0]]
            assert page.locator("svg.timeline rect.clue").count() == 1
            assert page.locator("#reward-check").inner_text() == "= Σ"  # the weights of the run record explain the total
            page.keyboard.press("ArrowRight")
            page.wait_for_selector(".turn[data-turn='0']")
            observation = page.locator(".turn .observation").inner_text()
            if trainer == "legacy":  # the legacy dump holds the agent loop's summary: the tool's answers are not in it
                assert "not in verl's dump" in observation
            else:  # v1: the env's own trajectory from the agent loop's episode dump
                assert observation.startswith("crop_video returned 4 frames from 11.5s to 14.0s")
            browser.close()
            assert errors == []
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)
        app.close()


def test_rows_not_from_the_agent_loop_are_read_from_their_text_with_their_sample(tmp_path, index_sample_module):  # noqa: F811
    from videoseek.training.verl_plugin.records import sample_to_json
    from videoseek.training.verl_plugin.reward_fn import compute_score

    response = (CROP + "\nuser\n<tool_response>\ncrop_video returned 4 frames from 11.5s to 14.0s at 11.8s, 12.4s, 13.1s, 13.7s.\n</tool_response>\nassistant\n"
                + ANSWER)  # fmt: skip
    extra = compute_score("videoseek", response, "B", {"sample": sample_to_json(index_sample_module)})  # no agent-loop record
    RayPPOTrainer._write_generations(["system\nYou look at videos.\nuser\nWhich colour flashes?\nassistant\n"], [response], ["B"], [extra["score"]],
                                     {k: [v] for k, v in extra.items()}, str(tmp_path / "run" / "rollouts"), 7)  # fmt: skip
    app = ViewerApp([tmp_path / "run"])
    ep = app.api_episode({"run": ["A@s7"], "i": ["0"]})["episode"]
    assert ep["sample_id"] == "idx-1" and ep["question"] == index_sample_module.question and ep["clue_intervals"] == [[12.0, 13.5]]
    assert [(t["action"]["type"], t["action"].get("name")) for t in ep["turns"]] == [("tool_call", "crop_video"), ("answer", None)]
    assert ep["prediction"] == "B" and ep["correct"] is True
    assert [(c["start"], c["end"]) for c in ep["calls"]] == [(11.5, 14.0)]
    assert ep["turns"][0]["observation"]["text"].startswith("crop_video returned 4 frames")
    app.close()
