"""Grounding benchmarks: V-STaR and Charades-STA convert from their published files, and
`videoseek eval --benchmark` gives the numbers their own evaluation scripts give.

The expected numbers below were obtained once by running the official scripts on the hand-made
files of tests/data/benchmarks/ (only the numbers are stored here):

- V-STaR: ``eval.py`` ``evaluate_json`` and ``inference_demo.py``'s answer readers
  (``extract_timestamps``, ``extract_bounding_boxes``) of github.com/V-STaR-Bench/V-STaR at commit
  1894682b15be0a0c0c5ab24be6e8252743cd6c2f, on vstar_mini.json with the answers of
  vstar_predictions.json. Substituted: the Qwen2.5-72B-Instruct call in ``qwen2_5_evaluation`` ->
  the fixed reply of each record's "judge" entry, read with eval.py's own ``int()``/-1 rule (the
  model load at import was skipped; nothing else changed). eval.py prints 4 decimals: compared at 5e-5.
- Charades-STA: ``lmms_eval/tasks/charades_sta/utils.py`` of github.com/EvolvingLMMs-Lab/lmms-eval
  at commit 75571cfe0fa36ca5ec2e6aa2bb268f9d38295af3 (``temporal_grounding_process_results_generation``
  then ``_temporal_grounding_compute_metrics``) on charades_sta_mini.txt with the answers of
  charades_sta_predictions.json (a missing answer passed as ""); only its logger and
  submission-file imports were stubbed. Printed as JSON: compared at 1e-9.
"""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from videoseek.agents import judge as judge_mod
from videoseek.envs.benchmarks import charades_sta as ch_metrics
from videoseek.envs.benchmarks import charades_timelens as tl_metrics
from videoseek.envs.benchmarks import vstar as vs_metrics
from videoseek.cli import main
from videoseek.envs.convert import FIELD_MAPS, ConvertOptions, convert_files
from videoseek.envs.sample import DataError, VideoSample
from videoseek.envs.trajectory import Trajectory

DATA = Path(__file__).parents[1] / "data" / "benchmarks"
VSTAR = DATA / "vstar_mini.json"
VSTAR_PRED = json.loads((DATA / "vstar_predictions.json").read_text())
CHARADES = DATA / "charades_sta_mini.txt"
CHARADES_PRED = json.loads((DATA / "charades_sta_predictions.json").read_text())

# eval.py's printout for the hand-made run: (Acc, avg all score, avg valid score), then per chain
# (R1@0.3, R1@0.5, R1@0.7, m_tIoU, AP@0.1, AP@0.3, AP@0.5, AP@0.7, AP@0.9, m_vIoU, AM, LGM),
# then (mAM, mLGM), then "Combined" per chain: VQA&Temp, VQA&Spat, Temp&Spat, VQA&Temp&Spat.
VSTAR_OFFICIAL = {
    "Overall": ((0.2000, 0.7500, 1.0000),
                (0.2500, 0.2500, 0.2500, 0.2000, 0.4583, 0.4583, 0.4583, 0.3750, 0.3750, 0.4317, 0.2772, 0.3371),
                (0.7500, 0.7500, 0.5000, 0.5523, 0.4583, 0.4583, 0.4583, 0.2917, 0.2083, 0.3862, 0.3795, 0.5049),
                (0.3284, 0.4210),
                ((0.0, 0.2), (0.2, 0.2), (0.2, 0.6), (0.0, 0.2))),
    "Short": ((0.0, 1.0, 1.0),
              (1.0, 1.0, 1.0, 0.8000, 0.6667, 0.6667, 0.6667, 0.3333, 0.3333, 0.5602, 0.4534, 0.8103),
              (1.0, 1.0, 0.0, 0.6667, 0.6667, 0.6667, 0.6667, 0.3333, 0.0, 0.4815, 0.3827, 0.5851),
              (0.4181, 0.6977),
              ((0.0, 0.0), (0.0, 0.0), (1.0, 1.0), (0.0, 0.0))),
    "Medium": ((0.5, 1.0, 1.0),
               (0.0, 0.0, 0.0, 0.0, 0.3333, 0.3333, 0.3333, 0.3333, 0.3333, 0.3333, 0.2778, 0.3662),
               (1.0, 1.0, 1.0, 0.7712, 0.5833, 0.5833, 0.5833, 0.4167, 0.4167, 0.5316, 0.6009, 0.9755),
               (0.4394, 0.6709),
               ((0.0, 0.5), (0.5, 0.5), (0.0, 1.0), (0.0, 0.5))),
    "Long": ((0.0, 0.0, 0.0),
             (0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.1667, 0.2310),
             (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
             (0.0833, 0.1155),
             ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0))),
    "Sports": ((0.3333, 1.0, 1.0),
               (0.3333, 0.3333, 0.3333, 0.2667, 0.4444, 0.4444, 0.4444, 0.3333, 0.3333, 0.4090, 0.3363, 0.4138),
               (1.0, 1.0, 0.6667, 0.7364, 0.6111, 0.6111, 0.6111, 0.3889, 0.2778, 0.5149, 0.5282, 0.8207),
               (0.4323, 0.6173),
               ((0.0, 0.3333), (0.3333, 0.3333), (0.3333, 1.0), (0.0, 0.3333))),
    "Cooking": ((0.0, 0.0, 0.0),
                (0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.1667, 0.2310),
                (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
                (0.0833, 0.1155),
                ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0))),
}
CHAIN_KEYS = ("R1@0.3", "R1@0.5", "R1@0.7", "m_tIoU", "AP@0.1", "AP@0.3", "AP@0.5", "AP@0.7", "AP@0.9", "m_vIoU", "AM", "LGM")
COMBINED_KEYS = ("vqa_temp", "vqa_spat", "temp_spat", "vqa_temp_spat")
# lmms-eval's _temporal_grounding_compute_metrics on the hand-made run (9 queries, 2 unreadable).
CHARADES_OFFICIAL = {"IOU@3": 66.66666666666667, "IOU@5": 66.66666666666667, "IOU@7": 44.44444444444444, "mIOU": 53.192818110850894}


def _traj(sample: VideoSample, text: str | None, index: int = 0, failure: str | None = None) -> Trajectory:
    return Trajectory(episode_id=f"{sample.id}/{index}", sample_id=sample.id, group={"id": sample.id, "index": index},
                      question=sample.question, answer=sample.answer, problem_type=sample.problem_type.value,
                      duration=sample.duration or 60.0, video=sample.video, initial={"text": ""}, prediction=text,
                      terminated=text is not None, failure=failure)


def _vstar_run() -> tuple[list[Trajectory], dict[str, VideoSample]]:
    samples = convert_files([VSTAR], "vstar", ConvertOptions(video_root="/videos")).samples
    trajs = [_traj(s, VSTAR_PRED[s.metadata["benchmark"]["vid"]][s.metadata["benchmark"]["step"]]) for s in samples]
    return trajs, {s.id: s for s in samples}


def _fixed_judge(question: str, groundtruth: str, candidate: str) -> str:
    return next(p["judge"] for k, p in VSTAR_PRED.items() if k != "_comment" and p["what"] == candidate)


def _charades_run(path: Path = CHARADES) -> tuple[list[Trajectory], dict[str, VideoSample]]:
    samples = convert_files([path], "charades-sta").samples
    return [_traj(s, CHARADES_PRED[s.id]) for s in samples], {s.id: s for s in samples}


# ---- V-STaR ------------------------------------------------------------------------------------
def test_vstar_converts_each_record_into_its_five_questions():
    result = convert_files([VSTAR], "vstar", ConvertOptions(video_root="/videos"))
    assert not result.errors and len(result.samples) == 25
    by_id = {s.id: s for s in result.samples}
    assert [s.id for s in result.samples[:5]] == ["vA:what", "vA:when1", "vA:where1", "vA:where2", "vA:when2"]
    what, when1, where1, when2 = by_id["vA:what"], by_id["vA:when1"], by_id["vA:where1"], by_id["vA:when2"]
    assert what.problem_type.value == "free_form" and what.answer == "He throws a basketball."
    assert what.reference_reasoning.startswith("The man appears at 3 s") and what.video == "/videos/vA.mp4"
    assert when1.problem_type.value == "temporal_grounding" and json.loads(when1.answer) == [3, 8]
    assert "This video is 30.0 seconds long." in when1.question
    assert "time range [3, 4, 5, 6, 7, 8]" in where1.question and "640x360" in where1.question
    assert "[[100, 50, 200, 150], [110, 60, 210, 160], [300, 100, 400, 300]]" in when2.question
    assert json.loads(where1.answer) == {"3": [100, 50, 200, 150], "4": [110, 60, 210, 160], "6": [300, 100, 400, 300]}
    assert all(s.clue_intervals == [(3.0, 8.0)] and s.duration == 30.0 for s in result.samples[:5])
    assert where1.key_frames[0].time == 3.0 and where1.key_frames[0].boxes["man"] == pytest.approx([100 / 640, 50 / 360, 200 / 640, 150 / 360])
    bench = by_id["vC:where2"].metadata["benchmark"]
    assert bench["step"] == "where2" and bench["step_chain"] == 2 and bench["record"] == 2 and bench["domain"] == "Cooking"
    assert bench["bboxes"][1]["timestamp"] == 55.0 and isinstance(bench["bboxes"][1]["timestamp"], float)  # kept as written
    assert by_id["vB:when1"].clue_intervals == [(10.5, 20.2)]


def test_vstar_bad_record_is_named_by_line_step_and_field(tmp_path):
    records = json.loads(VSTAR.read_text())
    records[1]["timestamps"] = [20, "x"]
    del records[3]["bboxes"][0]["xmax"]
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(records, indent=2))
    result = convert_files([src], "vstar")
    assert len(result.samples) == 15 and len(result.errors) == 10
    line = 1 + src.read_text().split('"vid": "vB"')[0].count("\n") - 1
    assert result.errors[0] == f"{src}:{line} (what): field 'timestamps': expected [start, end] in seconds, got [20, 'x']"
    assert any("(where1): field 'bboxes.0.xmax': expected a number, got None" in e for e in result.errors)
    with pytest.raises(DataError, match=r"bad\.json:\d+ \(what\): field 'timestamps'"):
        convert_files([src], "vstar", strict=True)


def test_vstar_metrics_equal_the_official_eval_script():
    trajs, samples = _vstar_run()
    m = vs_metrics.benchmark_metrics(trajs, samples, judge=_fixed_judge)
    assert (m["records"], m["rated"]) == (5, 4)  # vD has no what-answer: skipped, yet in the overall denominator
    groups = {"Overall": m["overall"], **m["by_length"], **m["by_domain"]}
    assert list(groups) == ["Overall", "Short", "Medium", "Long", "Sports", "Cooking"]
    for name, (vqa, c1, c2, means, combined) in VSTAR_OFFICIAL.items():
        g = groups[name]
        assert (g["acc"], g["avg_all_score"], g["avg_valid_score"]) == pytest.approx(vqa, abs=5e-5), name
        for c, expected in ((1, c1), (2, c2)):
            assert [g[f"chain{c}"][k] for k in CHAIN_KEYS] == pytest.approx(expected, abs=5e-5), (name, c)
        assert (g["mAM"], g["mLGM"]) == pytest.approx(means, abs=5e-5), name
        assert [tuple(g["combined"][k]) for k in COMBINED_KEYS] == [pytest.approx(v, abs=5e-5) for v in combined], name
    table = vs_metrics.format_table(m)
    assert "| Overall | 5 | 20.00 | 20.00 | 43.17 | 55.23 | 38.62 | 32.84 | 42.10 |" in table
    assert "| Chain 2 | 75.00 | 75.00 | 50.00 | 55.23 |" in table


def test_vstar_answer_readers_follow_inference_demo():
    assert vs_metrics.extract_timestamps("from 3 to 7.5 s") == [3.0, 7.5]
    assert vs_metrics.extract_timestamps("3, 5 and 7") == [] and vs_metrics.extract_timestamps("00:03-00:07") == []
    assert vs_metrics.extract_bounding_boxes("[[3, [1, 2, 3, 4]]]") == {"3": [1, 2, 3, 4]}
    # an unclosed object: the regex falls back to the inner list, which fails as pairs and is returned as is
    assert vs_metrics.extract_bounding_boxes('{"3": [1, 2, 3, 4]') == [1, 2, 3, 4]
    assert vs_metrics.extract_bounding_boxes("no boxes") is None
    assert vs_metrics.temporal_iou([50, 60], [60.0, 50.0]) == 0.0  # a reversed span is not reordered
    assert vs_metrics.spatial_metrics([{"timestamp": 55.0, "xmin": 0, "ymin": 0, "xmax": 1, "ymax": 1}], {"55": [0, 0, 1, 1]}) == ([0.0] * 5, 0.0)


def test_vstar_default_judge_and_undefined_lgm():
    trajs, samples = _vstar_run()
    m = vs_metrics.benchmark_metrics(trajs, samples)
    assert m["judge"] == "rouge_judge" and "offline substitute" in vs_metrics.format_table(m)
    # ROUGE of "The man throws a basketball." vs "He throws a basketball." is >= 0.5: rated 2, correct.
    assert vs_metrics.rouge_judge("", "He throws a basketball.", "The man throws a basketball.") == "2"
    assert m["overall"]["acc"] == pytest.approx(1 / 5) and m["by_length"]["Short"]["acc"] == 1.0
    assert m["by_length"]["Short"]["chain1"]["LGM"] is None and m["by_length"]["Short"]["mLGM"] is None  # log(1 - 1)
    assert vs_metrics.judge_rating(" 3\n") == 3 and vs_metrics.judge_rating("3.") == -1


def test_vstar_uses_the_first_origin_episode_and_rejects_foreign_samples():
    trajs, samples = _vstar_run()
    extra = _traj(samples["vA:when1"], "3 8", index=1)  # a second episode of the group is ignored
    m = vs_metrics.benchmark_metrics([*trajs, extra], samples, judge=_fixed_judge)
    assert m["overall"]["chain1"]["m_tIoU"] == pytest.approx(0.2)
    charades = convert_files([CHARADES], "charades-sta").samples[0]
    with pytest.raises(ValueError, match="is not a vstar sample"):
        vs_metrics.benchmark_metrics([_traj(charades, "1 - 2")], {charades.id: charades})


# ---- Charades-STA ------------------------------------------------------------------------------
def test_charades_sta_converts_tall_text_and_lmms_eval_records(tmp_path):
    samples = convert_files([CHARADES], "charades-sta", ConvertOptions(video_root="/charades")).samples
    assert [s.id for s in samples[:3]] == ["3MSZA#0", "3MSZA#1", "0A8CF#0"] and len(samples) == 9
    s = samples[0]
    assert s.problem_type.value == "temporal_grounding" and json.loads(s.answer) == [24.3, 30.4] and s.clue_intervals == [(24.3, 30.4)]
    assert s.video == "/charades/3MSZA.mp4" and s.question.startswith("Please find the visual event")
    assert "the textual sentence: person turn a light on.. Please return its start time and end time." in s.question
    assert s.metadata["benchmark"] == {"name": "charades-sta", "vid": "3MSZA", "caption": "person turn a light on.", "timestamp": [24.3, 30.4]}
    degenerate = next(x for x in samples if x.id == "2C3DE#0")
    assert degenerate.clue_intervals == [] and degenerate.metadata["benchmark"]["timestamp"] == [8.0, 8.0]  # kept, scored
    records = tmp_path / "charades.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in [
        {"video": "3MSZA.mp4", "caption": "person turn a light on", "timestamp": [24.3, 30.4], "duration": 31.0},
        {"video": "3MSZA.mp4", "caption": "person opens the door", "timestamp": "[11.0, 16.0]", "duration": 31.0},
        {"video": "0A8CF.mp4", "caption": "a person eats", "timestamp": [5, "late"]},
    ]) + "\n")
    result = convert_files([records], "charades-sta")
    assert [x.id for x in result.samples] == ["3MSZA#0", "3MSZA#1"] and result.samples[1].clue_intervals == [(11.0, 16.0)]
    assert result.samples[0].duration == 31.0
    assert result.errors == [f"{records}:3: field 'timestamp': not a number: 'late'"]
    bad = tmp_path / "bad.txt"
    bad.write_text("3MSZA 24.3 30.4##person turn a light on.\n3MSZA 24.3 person without times\n")
    result = convert_files([bad], "charades-sta")
    assert len(result.samples) == 1 and result.errors == [f"{bad}:2: field 'line': expected 'VID START END##sentence', got '3MSZA 24.3 person without times'"]


def test_charades_sta_metrics_equal_lmms_eval():
    trajs, samples = _charades_run()
    m = ch_metrics.benchmark_metrics(trajs, samples)
    assert {k: m[k] for k in CHARADES_OFFICIAL} == pytest.approx(CHARADES_OFFICIAL, abs=1e-9)
    assert (m["n"], m["bad_predictions"]) == (9, 2)
    assert "| all | 9 | 66.67 | 66.67 | 44.44 | 53.19 |" in ch_metrics.format_table(m)


def test_charades_sta_moment_reading_follows_lmms_eval():
    read = ch_metrics.extract_moment
    assert read("The event starts at 00:00:12 and ends at 00:00:18.") == [[12.0, 18.0]]
    assert read("It happens in 1:05 - 1:10.") == [[65.0, 70.0]]
    assert read("Start: 9 seconds\nEnd: 2 seconds") == [[2.0, 9.0]]  # first numbers, paired, then ordered
    assert read("The person takes a towel at 0s - 5.5s.") == [[0.0, 5.5]]  # the "s"-unit fallback
    assert read("the event happens in 3 to 7 and 9 to 12") == [[3.0, 7.0]]  # "to" -> "-", first pair only
    assert read("I cannot tell when this happens.") == []
    # a failed episode is a bad prediction, as an unreadable one is
    trajs, samples = _charades_run()
    trajs[0] = _traj(samples["3MSZA#0"], None, failure="decode error")
    m = ch_metrics.benchmark_metrics(trajs, samples)
    assert m["bad_predictions"] == 3 and m["mIOU"] < CHARADES_OFFICIAL["mIOU"]


# ---- CLI wiring --------------------------------------------------------------------------------
def _write_run(run: Path, trajs: list[Trajectory], data: Path) -> None:
    run.mkdir(parents=True)
    (run / "trajectories.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trajs))
    (run / "run.json").write_text(json.dumps({"data": [str(data)], "policy": "scripted"}))


def test_cli_convert_and_eval_benchmark(tmp_path, capsys):
    data = tmp_path / "charades.jsonl"
    assert main(["convert", "--from", "charades-sta", str(CHARADES), "--out", str(data), "--video-root", str(tmp_path)]) == 0
    assert "wrote 9 samples" in capsys.readouterr().out
    samples = VideoSample.from_jsonl(data)
    run = tmp_path / "run"
    _write_run(run, [_traj(s, CHARADES_PRED[s.id]) for s in samples], data)
    assert main(["eval", str(run), "--benchmark", "charades-sta"]) == 0
    out = capsys.readouterr().out
    assert "| all | 9 | 66.67 | 66.67 | 44.44 | 53.19 |" in out and "metrics written to" in out
    written = json.loads((run / "metrics.json").read_text())
    assert written["benchmark"]["name"] == "charades-sta" and written["benchmark"]["mIOU"] == pytest.approx(CHARADES_OFFICIAL["mIOU"])
    assert written["episodes"] == 9  # the run's own metrics stay beside the benchmark's

    with pytest.raises(SystemExit) as exc:  # the registry's names are the option's choices
        main(["eval", str(run), "--benchmark", "nope"])
    assert exc.value.code == 2
    assert "argument --benchmark: invalid choice: 'nope' (choose from vstar, charades-sta" in capsys.readouterr().err.replace("'vstar', 'charades-sta'", "vstar, charades-sta")
    assert main(["eval", str(run), "--benchmark", "vstar"]) == 2
    assert "is not a vstar sample" in capsys.readouterr().err
    assert main(["eval", str(run), "--benchmark", "charades-sta", "--judge", "hf:/models/judge"]) == 2
    assert "--judge: benchmark charades-sta has no judged answers" in capsys.readouterr().err
    assert main(["eval", str(run), "--judge", "hf:/models/judge"]) == 2
    assert "--judge and --data go with --benchmark NAME" in capsys.readouterr().err
    (run / "run.json").unlink()
    assert main(["eval", str(run), "--benchmark", "charades-sta"]) == 2
    assert "pass --data samples.jsonl" in capsys.readouterr().err
    assert main(["eval", str(run), "--benchmark", "charades-sta", "--data", str(data)]) == 0


def test_cli_missing_benchmark_modules_are_one_line_errors(tmp_path, capsys, monkeypatch):
    from videoseek.envs import benchmarks as env_benchmarks

    monkeypatch.setitem(env_benchmarks.BENCHMARKS, "vstar", "no_such_module")
    assert main(["convert", "--from", "vstar", str(VSTAR), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("videoseek convert: error: benchmark 'vstar': its converter module cannot be imported") and "\n" not in err
    data = tmp_path / "c.jsonl"
    assert main(["convert", "--from", "charades-sta", str(CHARADES), "--out", str(data)]) == 0
    _write_run(tmp_path / "run", _charades_run()[0], data)
    monkeypatch.setitem(env_benchmarks.BENCHMARKS, "charades-sta", "no_such_module")
    assert main(["eval", str(tmp_path / "run"), "--benchmark", "charades-sta"]) == 2
    assert "--benchmark charades-sta: its module cannot be imported" in capsys.readouterr().err


def test_show_mapping_and_lazy_imports(capsys):
    assert main(["convert", "--from", "vstar", "x.json", "--out", "y.jsonl", "--show-mapping"]) == 0
    assert "spatial_question_2" in capsys.readouterr().out
    assert "bboxes[k]" in FIELD_MAPS["vstar"] and "vstar" in FIELD_MAPS and "charades-sta" in list(FIELD_MAPS)
    code = ("import sys; from videoseek.envs.convert import convert_files, FIELD_MAPS; FIELD_MAPS['open-o3']; "
            "convert_files([sys.argv[1]], 'charades-sta'); "
            "print(sorted(m for m in sys.modules if m.startswith('videoseek.envs.benchmarks.') and '._' not in m))")  # shared helpers aside
    out = subprocess.run([sys.executable, "-c", code, str(CHARADES)], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['videoseek.envs.benchmarks.charades_sta']"


@pytest.mark.parametrize("module", [vs_metrics, ch_metrics, tl_metrics, judge_mod])
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_cli_eval_vstar_with_and_without_a_judge(tmp_path, capsys, monkeypatch):
    data = tmp_path / "vstar.jsonl"
    assert main(["convert", "--from", "vstar", str(VSTAR), "--out", str(data), "--video-root", str(tmp_path)]) == 0
    samples = VideoSample.from_jsonl(data)
    run = tmp_path / "run"
    _write_run(run, [_traj(s, VSTAR_PRED[s.metadata["benchmark"]["vid"]][s.metadata["benchmark"]["step"]]) for s in samples], data)
    assert main(["eval", str(run), "--benchmark", "vstar"]) == 0
    assert "Judge: rouge_judge (offline substitute" in capsys.readouterr().out
    seen = []
    monkeypatch.setattr(judge_mod, "judge_from_spec", lambda spec, *prompts, **kw: seen.append((spec, prompts)) or _fixed_judge)
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", "vllm:/models/Qwen2.5-72B-Instruct"]) == 0
    assert "| Overall | 5 | 20.00 | 20.00 | 43.17 |" in capsys.readouterr().out and seen == [("vllm:/models/Qwen2.5-72B-Instruct", vs_metrics.JUDGE_PROMPTS)]
    written = json.loads((run / "metrics.json").read_text())["benchmark"]
    assert written["judge"] == "vllm:/models/Qwen2.5-72B-Instruct" and written["overall"]["mAM"] == pytest.approx(0.3284, abs=5e-5)


# ---- Charades-TimeLens -------------------------------------------------------------------------
# TencentARC/TimeLens at commit 5d90c067246ddb11db3203adbb0085bdc48d9e5e, run once on
# charades_timelens_mini.json with the answers of charades_timelens_predictions.json (a missing
# answer passed as ""): the results file written as its README prescribes,
# {"{vid}.mp4>>>{parse_query(query)}>>>{span}": {"answers": text}}, scored by
# `python evaluation/compute_metrics.py -f raw.json` (nothing changed); for the inference variant the
# "timestamps" of each entry made by eval_dataloader.py's own lines (extract_time, else
# [duration + 10, duration + 20], round(t / UNIT) * UNIT) and scored by the same script.
TIMELENS = DATA / "charades_timelens_mini.json"
TIMELENS_PRED = json.loads((DATA / "charades_timelens_predictions.json").read_text())
TIMELENS_OFFICIAL = {"IOU@3": 64.28571428571429, "IOU@5": 64.28571428571429, "IOU@7": 64.28571428571429, "mIOU": 57.246411356533706}
TIMELENS_INFERENCE_OFFICIAL = {**TIMELENS_OFFICIAL, "mIOU": 56.763619901037735}


def _timelens_run() -> tuple[list[Trajectory], dict[str, VideoSample]]:
    samples = convert_files([TIMELENS], "charades-timelens").samples
    return [_traj(s, TIMELENS_PRED[s.id]) for s in samples], {s.id: s for s in samples}


def test_charades_timelens_converts_timelens_bench_layout(tmp_path):
    samples = convert_files([TIMELENS], "charades-timelens", ConvertOptions(video_root="/tl/charades")).samples
    assert len(samples) == 14 and [s.id for s in samples[:4]] == ["AO8RW#0", "AO8RW#1", "AO8RW#2", "1K0SU#0"]
    s = samples[1]
    assert s.video == "/tl/charades/AO8RW.mp4" and s.duration == 30.5 and s.clue_intervals == [(12.0, 18.0)]
    assert s.question == ("Please find the visual event described by the sentence 'person opens the door', determining its "
                          "starting and ending times. The format should be: 'The event happens in <start time> - <end time> seconds'.")
    assert s.metadata["benchmark"] == {"name": "charades-timelens", "vid": "AO8RW", "query": "person opens the door",
                                       "query_raw": "person  opens the door", "span": [12.0, 18.0], "duration": 30.5}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"V1": {"duration": 10, "spans": [[1, 2]], "queries": ["a", "b"]},
                               "V2": {"duration": 10, "spans": [[1, "x"]], "queries": ["q"]},
                               "V3": {"duration": 10, "spans": [[1, 3]], "queries": ["fine"]}}))
    result = convert_files([bad], "charades-timelens")
    assert [s.id for s in result.samples] == ["V3#0"]
    assert [str(e) for e in result.errors] == [f"{bad}: video V1: field 'spans': 1 spans for 2 queries",
                                               f"{bad}: video V2, query 0: field 'spans': expected seconds >= 0, got 'x'"]


def test_charades_timelens_metrics_equal_timelens_compute_metrics():
    trajs, samples = _timelens_run()
    m = tl_metrics.benchmark_metrics(trajs, samples)
    assert {k: m[k] for k in TIMELENS_OFFICIAL} == pytest.approx(TIMELENS_OFFICIAL, abs=1e-9)
    assert (m["n"], m["unparseable"], m["reversed"], m["protocol"]) == (14, 2, 4, "raw")
    variant = tl_metrics.benchmark_metrics(trajs, samples, protocol="timelens-inference")
    assert {k: variant[k] for k in TIMELENS_OFFICIAL} == pytest.approx(TIMELENS_INFERENCE_OFFICIAL, abs=1e-9)
    with pytest.raises(ValueError, match="unknown protocol 'x'"):
        tl_metrics.benchmark_metrics(trajs, samples, protocol="x")
    # lmms-eval's Charades-STA reader scores the same answers differently (sentence filter, "to" -> "-", swaps)
    lmms = [ch_metrics.extract_moment(t.prediction or "") for t in trajs]
    lmms_miou = 100 * sum(ch_metrics.moment_iou(samples[t.sample_id].metadata["benchmark"]["span"], mo[0]) if mo else 0.0
                          for t, mo in zip(trajs, lmms)) / len(trajs)
    assert lmms_miou == pytest.approx(47.42703533026114) and abs(lmms_miou - m["mIOU"]) > 9


def test_charades_timelens_reads_answers_as_extract_time():
    read = tl_metrics.extract_time
    assert read("It starts at 12.0s and ends at 18.0s.") == [(12.0, 18.0)]  # all numbers, paired
    assert read("The event happens at 00:00:20.3 to 00:00:24.6.") == [(20.3, 24.6)]  # clock times first
    assert read("The event happens in 30 - 14 seconds.") == [(30.0, 14.0)]  # not swapped
    assert read("heard 10 to 22 seconds in, towards the end 3 - 4.") == [(3.0, 4.0)]  # a - b before a to b
    assert read("At 0:05 the phone rings; the event is 11 - 20.") == [(11.0, 20.0)]  # an odd clock count is dropped
    assert read("only 7") == []
    assert tl_metrics.predicted_moment(None, 30.0) == (-100.0, -100.0)
    assert tl_metrics.predicted_moment("no idea", 30.0, "timelens-inference") == (40.0, 50.0)


def test_cli_convert_and_eval_charades_timelens(tmp_path, capsys):
    data = tmp_path / "tl.jsonl"
    assert main(["convert", "--from", "charades-timelens", str(TIMELENS), "--out", str(data), "--video-root", str(tmp_path)]) == 0
    assert "wrote 14 samples" in capsys.readouterr().out
    run = tmp_path / "run"
    _write_run(run, [_traj(s, TIMELENS_PRED[s.id]) for s in VideoSample.from_jsonl(data)], data)
    assert main(["eval", str(run), "--benchmark", "charades-timelens"]) == 0
    assert "| all | 14 | 64.29 | 64.29 | 64.29 | 57.25 |" in capsys.readouterr().out
    assert json.loads((run / "metrics.json").read_text())["benchmark"]["mIOU"] == pytest.approx(TIMELENS_OFFICIAL["mIOU"])


# ---- a served judge over the OpenAI API (the real `openai` client against a local stub) --------
class _StubJudgeServer:
    """A minimal OpenAI-compatible server on 127.0.0.1 (random port): ``GET /v1/models`` lists one
    model, ``POST /v1/chat/completions`` replies with the fixed rating of the candidate in the
    V-STaR template (vstar_predictions.json's "judge"). Records every chat request's body."""

    def __init__(self, model: str = "stub-judge") -> None:
        self.model, self.requests = model, []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot hold the server

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._send({"object": "list", "data": [{"id": stub.model, "object": "model", "created": 0, "owned_by": "stub"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                if body["model"] != stub.model:  # as vLLM answers an unknown model
                    data = json.dumps({"object": "error", "message": f"The model `{body['model']}` does not exist.",
                                       "type": "NotFoundError", "code": 404}).encode()
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                user = body["messages"][-1]["content"]
                candidate = user.split("\nCandidate answer: ", 1)[1].rsplit("\nYour response: ", 1)[0]
                self._send({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": _fixed_judge("", "", candidate)}}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(timeout=5)
        self.server.server_close()


@pytest.fixture
def stub_judge():
    stub = _StubJudgeServer()
    try:
        yield stub
    finally:
        stub.stop()


def _vstar_cli_run(tmp_path: Path) -> Path:
    data = tmp_path / "vstar.jsonl"
    assert main(["convert", "--from", "vstar", str(VSTAR), "--out", str(data), "--video-root", str(tmp_path)]) == 0
    run = tmp_path / "run"
    samples = VideoSample.from_jsonl(data)
    _write_run(run, [_traj(s, VSTAR_PRED[s.metadata["benchmark"]["vid"]][s.metadata["benchmark"]["step"]]) for s in samples], data)
    return run


@pytest.mark.timeout(120)
def test_cli_eval_vstar_with_a_served_judge_caches_and_replays_its_verdicts(tmp_path, capsys, stub_judge):
    run = _vstar_cli_run(tmp_path)
    capsys.readouterr()
    spec = f"openai:{stub_judge.url}#stub-judge"
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", spec]) == 0
    out = capsys.readouterr().out
    assert "| Overall | 5 | 20.00 | 20.00 | 43.17 | 55.23 | 38.62 | 32.84 | 42.10 |" in out  # the official numbers
    assert "(4 asked, 0 reused)" in out
    # one request per rated record, V-STaR's prompt, temperature 0, the named model
    assert len(stub_judge.requests) == 4
    assert all(r["temperature"] == 0 and r["model"] == "stub-judge" and r["messages"][0]["content"] == vs_metrics.SYSTEM_PROMPT
               for r in stub_judge.requests)
    record = json.loads(VSTAR.read_text())[0]
    assert vs_metrics.USER_TEMPLATE.format(record["question"], record["answer"], VSTAR_PRED["vA"]["what"]) in {
        r["messages"][1]["content"] for r in stub_judge.requests}
    first = json.loads((run / "metrics.json").read_text())["benchmark"]
    assert first["judge"] == spec and first["verdicts"] == {"file": str(run / "verdicts.jsonl"), "asked": 4, "reused": 0}
    cache = [json.loads(line) for line in (run / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(r["reply"] for r in cache) == ["0", "1", "2", "abc"] and {r["judge"] for r in cache} == {"openai:stub-judge"}
    assert {r["candidate"] for r in cache} == {VSTAR_PRED[v]["what"] for v in ("vA", "vB", "vC", "vE")}

    # the server stopped: a re-run asks nothing, reads the cache and gives the same numbers
    stub_judge.stop()
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", spec]) == 0
    assert "(0 asked, 4 reused)" in capsys.readouterr().out and len(stub_judge.requests) == 4
    again = json.loads((run / "metrics.json").read_text())["benchmark"]
    assert again["overall"] == first["overall"] and again["by_length"] == first["by_length"] and again["by_domain"] == first["by_domain"]
    assert len((run / "verdicts.jsonl").read_text().splitlines()) == 4  # nothing appended

    # file: replays the verdicts: the same metrics, no server
    replay_out = tmp_path / "replay" / "metrics.json"
    replay_out.parent.mkdir()
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", f"file:{run / 'verdicts.jsonl'}", "--out", str(replay_out)]) == 0
    replay = json.loads(replay_out.read_text())["benchmark"]
    assert {k: replay[k] for k in ("overall", "by_length", "by_domain")} == {k: first[k] for k in ("overall", "by_length", "by_domain")}
    assert replay["verdicts"]["judged_by"] == ["openai:stub-judge"] and not (replay_out.parent / "verdicts.jsonl").exists()
    capsys.readouterr()

    # the server unreachable and no cache: one line, exit 2
    fresh = tmp_path / "fresh" / "metrics.json"
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", spec, "--out", str(fresh)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"videoseek eval: error: --benchmark vstar: --judge openai:{stub_judge.url}: cannot reach the judge server") and "\n" not in err


@pytest.mark.timeout(60)
def test_served_judge_without_a_model_name_asks_the_server(tmp_path, stub_judge):
    judge = judge_mod.judge_from_spec(f"openai:{stub_judge.url}", vs_metrics.SYSTEM_PROMPT, vs_metrics.USER_TEMPLATE,
                                      cache=tmp_path / "v.jsonl")
    assert judge.many([("q", "r", "Salt."), ("q", "r", "Salt."), ("q", "r", "She holds a flag.")]) == ["abc", "abc", "2"]
    assert judge.judge.model == "stub-judge" and judge.summary()["asked"] == 2 and judge.summary()["reused"] == 1
    assert stub_judge.requests[0]["model"] == "stub-judge" and len(stub_judge.requests) == 2
    # a model the server does not serve: one line
    wrong = judge_mod.judge_from_spec(f"openai:{stub_judge.url}#nope", "s", "{} {} {}")
    with pytest.raises(judge_mod.JudgeError, match=r"^--judge openai:http://127\.0\.0\.1:\d+/v1: the server answered 404 ") as info:
        wrong("q", "r", "c")
    assert "\n" not in str(info.value)
    # a cache line of another judge is not reused
    other = judge_mod.CachedJudge(lambda q, r, c: "0", tmp_path / "v.jsonl", "openai:another")
    assert other.many([("q", "r", "Salt.")]) == ["0"] and other.asked == 1


def test_bad_judge_specs_and_verdict_files_are_one_line_errors(tmp_path, capsys):
    run = _vstar_cli_run(tmp_path)
    capsys.readouterr()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "reference": "r", "candidate": "c", "reply": "2"}) + "\n"
                   + json.dumps({"question": "q", "reference": "r", "candidate": "c", "reply": 2}) + "\n")
    cases = [
        ("openai:localhost:8000", "--judge 'openai:localhost:8000': expected openai:http(s)://HOST:PORT/v1[#MODEL]"),
        ("gpt4", "--judge 'gpt4': expected openai:URL[#MODEL], file:VERDICTS.jsonl, hf:PATH or vllm:PATH"),
        (f"file:{bad}", f"{bad}:2: field 'reply': expected a string, got 2"),
        (f"file:{tmp_path / 'none.jsonl'}", f"{tmp_path / 'none.jsonl'}: cannot read the verdicts file"),
    ]
    for spec, message in cases:
        assert main(["eval", str(run), "--benchmark", "vstar", "--judge", spec]) == 2, spec
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    bad.write_text(json.dumps({"question": "q", "reference": "r", "candidate": "c", "reply": "2"}) + "\n{not json\n")
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", f"file:{bad}"]) == 2
    assert f"{bad}:2: not a JSON object" in capsys.readouterr().err
    # a verdicts file without this run's answers
    bad.write_text(json.dumps({"question": "q", "reference": "r", "candidate": "c", "reply": "2"}) + "\n")
    assert main(["eval", str(run), "--benchmark", "vstar", "--judge", f"file:{bad}"]) == 2
    assert f"{bad}: no verdict for the candidate 'The man throws a basketball.'" in capsys.readouterr().err
