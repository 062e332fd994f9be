"""Multiple-choice benchmarks (VideoMME, MVBench, LVBench, Video-Holmes, VSI-Bench): each
hand-made annotation file under tests/data/benchmarks/<name>/ converts; its predictions
(predictions.json: sample id -> the agent's last turn, null for an episode without one) score the
numbers that benchmark's own evaluation code gives on the same inputs.

The expected numbers were obtained once by running the official code on these files (in a scratch
folder, never stored here), feeding it what `videoseek.envs.benchmarks.<name>` feeds it: the
``<answer>`` text ("" for none; Video-Holmes the whole turn):

- VideoMME: ``evaluation/eval_your_results.py`` of MME-Benchmarks/Video-MME at commit 4e7566d
  (its last version), ``eval_your_results(..., video_types="short,medium,long", skip_missing=True,
  return_*=True)`` on a results file in its format; it prints one decimal.
- MVBench: ``check_ans`` and the accuracy cells of ``video_chat2/mvbench.ipynb``, OpenGVLab/Ask-Anything
  commit 71ac7a2 (only those cells: the model cells need the VideoChat2 weights). The answer-less
  episode was fed as the prediction "none" (wrong), since the notebook always has a completion.
- LVBench: ``polish_answer`` then ``compute_accuracy`` (lvbench/metrics/compute_accuracy.py),
  THUDM/LVBench commit f998d95 (fractions; x 100 here).
- Video-Holmes: ``evaluate.py``'s ``evaluate`` at TencentARC/Video-Holmes commit 52ef8da, with its
  model functions ``prepare_internvl_25_8b`` / ``predict_internvl`` replaced by ones returning the
  predictions below (no model, no video); its per-question "Predicr Answer" and its CSV.
- Video-MME-v2: ``evaluate`` of ``evaluation/test_video_mme_v2.py``, MME-Benchmarks/Video-MME-v2
  commit b24176a, on a DataFrame of test.jsonl with a ``prediction`` column (the <answer> text, ""
  for none), written to TSV and read back as its ``main`` does; the ratings of its ``_rating.json``.
- VideoMMMU: ``videoperception_process_results`` then ``videoperception_aggregate_results`` of
  ``lmms_eval/tasks/videommmu/utils.py``, videommmu/VideoMMMU commit 103a3a5, once per track file
  (its imports of decord, loguru and lmms-eval's file_utils stubbed, HF_HOME set; nothing else
  changed); it rounds accuracies to 5 decimals (fractions; x 100 here).
- VSI-Bench: ``vsibench_process_results`` and ``vsibench_aggregate_results`` of
  ``lmms_eval/tasks/vsibench/utils.py``, vision-x-nyu/thinking-in-space commit c26ba54, with a stub
  ``loguru`` logger (not installed; used only for log lines).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from videoseek.envs.benchmarks import benchmark_module
from videoseek.envs.convert import ConvertOptions, RowError, convert_files
from videoseek.envs.sample import VideoSample, write_jsonl
from videoseek.envs.trajectory import GroupInfo, Observation, Trajectory, Turn

DATA = Path(__file__).parents[1] / "data" / "benchmarks"
FILES = {
    "videomme": ["videomme/videomme.jsonl"],
    "mvbench": ["mvbench/action_sequence.json", "mvbench/object_shuffle.json", "mvbench/episodic_reasoning.json"],
    "lvbench": ["lvbench/video_info.meta.jsonl"],
    "video-holmes": ["video_holmes/test_Video-Holmes.json"],
    "vsi-bench": ["vsi_bench/test.jsonl"],
    "video-mme-v2": ["video_mme_v2/test.jsonl"],
    "videommmu": ["videommmu/Perception/test.jsonl", "videommmu/Adaptation/test.jsonl"],
}
FOLDER = {"videomme": "videomme", "mvbench": "mvbench", "lvbench": "lvbench", "video-holmes": "video_holmes", "vsi-bench": "vsi_bench",
          "video-mme-v2": "video_mme_v2", "videommmu": "videommmu"}
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def convert(name: str, root: str = "/videos") -> list[VideoSample]:
    result = convert_files([DATA / f for f in FILES[name]], name, ConvertOptions(video_root=root), strict=True)
    return result.samples


def trajectory(sample: VideoSample, text: str | None, index: int = 0, role: str = "origin") -> Trajectory:
    """An episode whose last turn is `text` (None: no turn at all); the prediction is its
    <answer>, as the env parses it."""
    m = _ANSWER.search(text) if text else None
    turns = [] if text is None else [Turn(index=0, assistant=text, action={"type": "answer" if m else "crop_video"},
                                          observation=Observation(text=""), evidence={})]  # fmt: skip
    return Trajectory(
        episode_id=f"{sample.id}/g{index}", sample_id=sample.id, group=GroupInfo(id=sample.id, index=index, role=role),
        question=sample.question, options=sample.options, answer=sample.answer, problem_type=sample.problem_type.value,
        duration=60.0, video=sample.video, initial=Observation(text=""), turns=turns,
        prediction=m.group(1).strip() if m else None, terminated=bool(m),
    )  # fmt: skip


def run(name: str) -> dict:
    samples = convert(name)
    preds = json.loads((DATA / FOLDER[name] / "predictions.json").read_text())
    assert set(preds) == {s.id for s in samples}
    trajs = [trajectory(s, preds[s.id]) for s in samples]
    return benchmark_module(name).benchmark_metrics(trajs, {s.id: s for s in samples})


# ---- converters ---------------------------------------------------------------------------------
def test_videomme_converts_rows_and_the_nested_json(tmp_path):
    samples = convert("videomme")
    assert [s.id for s in samples][:3] == ["001-1", "001-2", "001-3"] and len(samples) == 9
    s = samples[0]
    assert s.video == "/videos/vmme0001.mp4" and s.answer == "C" and s.options[2] == "C. 3."
    assert s.duration is None and s.metadata["benchmark"]["duration"] == "short"
    assert s.metadata["task_kind"] == "Counting Problem" and s.metadata["benchmark"]["sub_category"] == "Humanity & History"
    # the parquet the dataset ships (options as a list column) and the repository's nested JSON
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (DATA / "videomme/videomme.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test-00000-of-00001.parquet")
    from_parquet = convert_files([tmp_path / "test-00000-of-00001.parquet"], "videomme", ConvertOptions(video_root="/videos")).samples
    assert [x.model_dump(exclude={"metadata"}) for x in from_parquet] == [x.model_dump(exclude={"metadata"}) for x in samples]
    nested = [{"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Law",
               "questions": [{k: r[k] for k in ("question_id", "task_type", "question", "options", "answer")} for r in rows[:2]]}]  # fmt: skip
    (tmp_path / "nested.json").write_text(json.dumps(nested, indent=4))
    got = convert_files([tmp_path / "nested.json"], "videomme", ConvertOptions(video_root="/v")).samples
    assert [x.id for x in got] == ["001-1", "001-2"] and got[0].video == "/v/001.mp4"


def test_mvbench_task_from_file_name_bound_as_clue():
    samples = {s.id: s for s in convert("mvbench")}
    s = samples["action_sequence-0"]
    assert s.video == "/videos/star/Charades_v1_480/ZS9XR.mp4" and s.answer == "B"
    assert s.options[1] == "(B) Opened the door." and s.clue_intervals == [(1.0, 6.5)]
    assert s.metadata["benchmark"]["task_type"] == "Action Sequence" and s.metadata["task_kind"] == "Action Sequence"
    assert samples["object_shuffle-0"].clue_intervals == [] and samples["object_shuffle-0"].video == "/videos/perception/videos/video_1001.mp4"
    assert samples["episodic_reasoning-0"].video == "/videos/tvqa/frames_fps3_hq/castle_s01e01_seg02_clip_00.mp4"


def test_lvbench_one_sample_per_question():
    samples = {s.id: s for s in convert("lvbench")}
    assert len(samples) == 6
    s = samples["2"]
    assert s.question == "Why does the crowd cheer?" and s.options == ["(A) A goal", "(B) A speech ends", "(C) Fireworks", "(D) Rain stops"]
    assert s.answer == "B" and s.clue_intervals == [(20.0, 31.0)] and s.duration == 60.0 and s.video == "/videos/lvb_video_01.mp4"
    assert s.metadata["benchmark"]["question_type"] == ["event understanding", "reasoning"] and s.metadata["benchmark"]["key"] == "lvb_video_01"
    assert samples["5"].clue_intervals == []  # an empty time_reference


def test_video_holmes_and_vsi_bench_convert():
    h = {s.id: s for s in convert("video-holmes")}
    assert h["hv01_2"].options[1] == "B: His wife" and h["hv01_2"].answer == "B" and h["hv01_2"].video == "/videos/hv01.mp4"
    assert h["hv01_2"].reference_reasoning == "The film shows it: His wife." and h["hv01_2"].metadata["task_kind"] == "SR"
    v = {s.id: s for s in convert("vsi-bench")}
    assert v["2"].problem_type.value == "multiple_choice" and v["2"].answer == "B" and v["2"].video == "/videos/arkitscenes/41069025.mp4"
    assert v["8"].problem_type.value == "numerical" and v["8"].answer == "4" and v["8"].options is None
    assert v["8"].metadata["benchmark"]["ground_truth"] == "4"


@pytest.mark.parametrize(
    ("name", "record", "field"),
    [
        ("videomme", {"question_id": "1", "videoID": "x", "duration": "tiny", "domain": "d", "sub_category": "s",
                      "task_type": "t", "question": "q", "options": ["A. a", "B. b"], "answer": "A"}, "duration"),
        ("videomme", {"question_id": "1", "videoID": "x", "duration": "short", "domain": "d", "sub_category": "s",
                      "task_type": "t", "question": "q", "options": ["A. a", "B. b"], "answer": "E"}, "answer"),
        ("mvbench", {"__task__": "Action Sequence", "__pos__": 0, "video": "v.mp4", "question": "q",
                     "candidates": ["a", "b"], "answer": "c", "start": 0, "end": 1}, "answer"),
        ("mvbench", {"__task__": "Action Sequence", "__pos__": 0, "video": "v.mp4", "question": "q",
                     "candidates": ["a", "b"], "answer": "a"}, "start"),
        ("lvbench", {"uid": 1, "key": "k", "question": "q?\n(A) a\n(B) b", "answer": "A", "question_type": []}, "question_type"),
        ("lvbench", {"uid": 1, "key": "k", "question": "no options", "answer": "A", "question_type": ["reasoning"]}, "question"),
        ("video-holmes", {"Question ID": "q", "video ID": "v", "Question Type": "SR", "Question": "q", "Options": ["a", "b"], "Answer": "A"}, "Options"),
        ("vsi-bench", {"id": 1, "dataset": "d", "scene_name": "s", "question_type": "object_counting", "question": "q",
                       "options": None, "ground_truth": "four"}, "ground_truth"),
        ("vsi-bench", {"id": 1, "dataset": "d", "scene_name": "s", "question_type": "weather", "question": "q",
                       "options": None, "ground_truth": "1"}, "question_type"),
    ],
)  # fmt: skip
def test_bad_rows_name_the_field(name, record, field):
    with pytest.raises(RowError) as err:
        benchmark_module(name).convert_record(record, 1, "f:1", ConvertOptions(), "/v")
    assert err.value.field == field


def test_bad_row_is_one_line_with_file_and_line(tmp_path):
    bad = tmp_path / "test.jsonl"
    bad.write_text(json.dumps({"id": 1, "dataset": "d", "scene_name": "s", "question_type": "object_counting",
                               "question": "q", "ground_truth": "x"}) + "\n")  # fmt: skip
    result = convert_files([bad], "vsi-bench", ConvertOptions())
    assert result.errors == [f"{bad}:1: field 'ground_truth': a object_counting answer must be a number, got 'x'"]
    wrong_file = tmp_path / "not_a_task.json"
    wrong_file.write_text("[]")
    assert "is not an MVBench task file" in convert_files([wrong_file], "mvbench", ConvertOptions()).errors[0]


def test_samples_round_trip_through_jsonl(tmp_path):
    for name in FILES:
        samples = convert(name, root=str(tmp_path / "videos"))
        back = VideoSample.from_jsonl(write_jsonl(samples, tmp_path / f"{name}.jsonl"))
        assert [s.model_dump() for s in back] == [s.model_dump() for s in samples]


# ---- metrics against the official scripts ------------------------------------------------------
def test_videomme_matches_eval_your_results():
    m = run("videomme")
    # eval_your_results.py printed (one decimal): per length "Overall", then the entire dataset
    assert {d: round(v["overall"], 1) for d, v in m["by_duration"].items()} == {"short": 66.7, "medium": 100.0, "long": 50.0}
    assert round(m["overall"], 1) == 66.7 and (m["answered"], m["correct"], m["questions"]) == (6, 4, 9)
    assert {k: round(v, 1) for k, v in m["domain"].items()} == {"Knowledge": 66.7, "Film & Television": 100.0, "Sports Competition": 50.0}
    assert {k: round(v, 1) for k, v in m["sub_category"].items()} == {"Humanity & History": 66.7, "Movie & TV Show": 100.0, "Basketball": 50.0}
    assert {k: round(v, 1) for k, v in m["task_type"].items()} == {
        "Temporal Perception": 100.0, "Object Recognition": 0.0, "OCR Problems": 0.0, "Counting Problem": 100.0,
        "Temporal Reasoning": 100.0, "Spatial Reasoning": 0.0, "Action Reasoning": 0.0, "Information Synopsis": 0.0,
    }  # fmt: skip
    table = benchmark_module("videomme").format_table(m)
    assert "| Short | Medium | Long | Overall |" in table and "| 66.7 | 100.0 | 50.0 | 66.7 |" in table


def test_videomme_answer_extraction_quirks():
    extract = benchmark_module("videomme").extract_characters_regex
    assert extract("Best answer:Best option: D") == "D"  # the script's two joined prefixes
    assert extract("(A) is wrong, B") == "A" and extract("a") == "" and extract("The answer is D.") == "D"
    assert extract("I cannot tell from these frames at all, sorry about that my friend") == ""


def test_mvbench_matches_the_notebook():
    m = run("mvbench")
    # final_res of mvbench.ipynb: {"Action Sequence": 66.67, "Object Shuffle": 66.67, "Episodic Reasoning": 0.0, "Avg": 57.14}
    assert m["by_task"] == pytest.approx({"Action Sequence": 200 / 3, "Object Shuffle": 200 / 3, "Episodic Reasoning": 0.0})
    assert m["avg"] == pytest.approx(400 / 7)
    table = benchmark_module("mvbench").format_table(m)
    assert table.splitlines()[0] == "| AS | OS | ER | Avg |" and "| 66.7 | 66.7 | 0.0 | 57.1 |" in table


def test_mvbench_check_ans_is_the_notebooks():
    check = benchmark_module("mvbench").check_ans
    # the notebook's per-question results on the hand-made predictions
    assert [check(p, g) for p, g in [("B", "(B) Opened the door."), ("(A) Ate the medicine.", "(A) Ate the medicine."),
                                     ("The answer is C", "(C) Closed the window."), ("b.", "(B) Under the second object."),
                                     ("C", "(A) Under the first object."), ("", "(C) Under the third object.")]] == [
        True, True, False, True, False, True]  # fmt: skip


def test_mvbench_keeps_the_first_line_as_the_notebook_does():
    # infer_mvbench: llm_message = return_prompt + llm_message.strip().split('\n')[0], then check_ans
    module = benchmark_module("mvbench")
    samples = convert("mvbench")
    sample = samples[0]
    letter = sample.answer
    wrong = next(x for x in "ABCD" if x != letter)
    texts = [f"{letter}\nA red sphere enters from the left.", f"  ({letter}) candidate\n\nbecause", f"{wrong}\n{letter}", "\n  \n"]
    got = []
    for text in texts:
        t = trajectory(sample, f"<answer>{text}</answer>")
        t.prediction = text  # the <answer> text with its new lines, as the env keeps it
        got.append(module.benchmark_metrics([t], {sample.id: sample})["correct"])
    assert got == [1, 1, 0, 1]  # a blank answer is "", which check_ans finds correct (module docstring)
    assert module.check_ans(f"{letter}\nA red sphere enters from the left.", module.ground_truth(sample.metadata["benchmark"])) is False


def test_lvbench_matches_compute_accuracy():
    m = run("lvbench")
    # compute_accuracy: {"entity recognition": 0.5, "event understanding": 1.0, "reasoning": 0.5,
    #   "key information retrieval": 1.0, "temporal grounding": 0.0, "summarization": 0.0, "acc": 0.5}
    assert m["by_category"] == pytest.approx({"entity recognition": 50.0, "event understanding": 100.0, "reasoning": 50.0,
                                              "key information retrieval": 100.0, "temporal grounding": 0.0, "summarization": 0.0})  # fmt: skip
    assert m["overall"] == pytest.approx(50.0)
    polish = benchmark_module("lvbench").polish_answer
    # polish_answer on the hand-made answers gave {'1': 'A', '2': 'B', '3': 'C', '4': 'I', '5': '', '6': 'b'}
    assert [polish(a) for a in ["(A) The man in red", "B. because the speech ends", "The answer is (C)", "I think D", "", "b"]] == list("ABCI") + ["", "b"]
    assert benchmark_module("lvbench").format_table(m).splitlines()[2] == "| 50.0 | 100.0 | 100.0 | 0.0 | 50.0 | 0.0 | 50.0 |"


def test_video_holmes_matches_evaluate_py():
    m = run("video-holmes")
    # evaluate.py's "Predicr Answer" per question and its CSV: SR 1.00, IMC 0.00, TCI 1.00, TA 0.50,
    # MHR 0.00, PAR 0.00, CTI 0.00, Overall Accuracy 0.50, Total Questions 8
    assert m["predictions"] == {"hv01_1": "A", "hv01_2": "B", "hv01_3": "A", "hv02_1": "D", "hv02_2": "E",
                                "hv02_3": "WRONG", "hv02_4": "B", "hv02_5": "WRONG"}  # fmt: skip
    assert m["by_type"] == {"SR": 100.0, "IMC": 0.0, "TCI": 100.0, "TA": 50.0, "MHR": 0.0, "PAR": 0.0, "CTI": 0.0}
    assert m["overall"] == 50.0 and m["questions"] == 8
    assert "| SR | IMC | TCI | TA | MHR | PAR | CTI | Overall |" in benchmark_module("video-holmes").format_table(m)


def test_vsi_bench_matches_utils_py():
    m = run("vsi-bench")
    # vsibench_aggregate_results: overall 57.083, counting 80.0, abs_dist 80.0, obj_size 0.0, room_size 80.0,
    # rel_distance 100.0, rel_direction 66.667, route_planning 0.0, appearance_order 50.0
    assert m["overall"] == pytest.approx(57.08333333333334)
    assert m["by_type"] == pytest.approx({
        "object_counting": 80.0, "object_abs_distance": 80.0, "object_size_estimation": 0.0, "room_size_estimation": 80.0,
        "object_rel_distance": 100.0, "object_rel_direction": 200 / 3, "route_planning": 0.0, "obj_appearance_order": 50.0,
    })  # fmt: skip
    vsi = benchmark_module("vsi-bench")
    # per-question scores utils.py gave: "5" for 4 -> 0.6, "3.1" for 2.5 -> 0.6, "18." for 20.5 -> 0.8
    assert [vsi.question_score(p, "object_counting", "4") for p in ("5", "4", "about")] == pytest.approx([0.6, 1.0, 0.0])
    assert vsi.question_score("3.1", "object_abs_distance", "2.5") == pytest.approx(0.6)
    assert vsi.question_score("18.", "room_size_estimation", "20.5") == pytest.approx(0.8)
    assert "| 57.1 | 80.0 | 80.0 | 0.0 | 80.0 | 100.0 | 66.7 | 0.0 | 50.0 |" in vsi.format_table(m)


def test_only_the_first_origin_episode_counts_and_unknown_samples_fail():
    samples = convert("lvbench")
    by_id = {s.id: s for s in samples}
    s = by_id["1"]
    trajs = [trajectory(s, "<answer>B</answer>", index=1), trajectory(s, "<answer>A</answer>", index=0),
             trajectory(s, "<answer>B</answer>", role="perturbed")]  # fmt: skip
    m = benchmark_module("lvbench").benchmark_metrics(trajs, by_id)
    assert m["questions"] == 1 and m["overall"] == 100.0
    with pytest.raises(ValueError, match="not in the dataset"):
        benchmark_module("lvbench").benchmark_metrics(trajs, {})
    with pytest.raises(ValueError, match="not converted from videomme"):
        benchmark_module("videomme").benchmark_metrics(trajs, by_id)


def test_metrics_are_json():
    for name in FILES:
        m = run(name)
        assert json.loads(json.dumps(m)) == m and m["scale"] == "percent"
        assert benchmark_module(name).format_table(m).startswith("|")


@pytest.mark.parametrize("name", ["videomme", "mvbench", "lvbench", "video_holmes", "vsi_bench", "video_mme_v2", "videommmu"])
def test_metric_docstring_examples(name):
    import doctest
    import importlib

    module = importlib.import_module(f"videoseek.envs.benchmarks.{name}")
    result = doctest.testmod(module)
    assert result.attempted and result.failed == 0


def test_video_mme_v2_matches_test_video_mme_v2():
    m = run("video-mme-v2")
    # _rating.json of test_video_mme_v2.py's evaluate on the hand-made replies
    assert m["final_rating"] == pytest.approx({"level_1": 62.5, "level_2": 62.5, "level_3": 100 / 3, "relevance_score": 62.5,
                                               "relevance_linear_score": 75.0, "logic_score": 52.77777777777778,
                                               "total": 56.66666666666667})  # fmt: skip
    assert m["second_head_rating"] == pytest.approx({"Information Retrieval": 62.5, "Temporal Understanding": 62.5, "Complex Reasoning": 100 / 3})
    assert m["third_head_rating"] == pytest.approx({"Counting": 25.0, "Order": 25.0, "Causal": 100 / 3, "State Change": 100.0, "OCR": 100.0})
    # "Simple accuracy (valid only): 82.35%"; "no prediction: 1, failed to extract: 2"
    assert m["simple_accuracy"] == pytest.approx(1400 / 17) and m["unread"] == 3 and (m["groups"], m["groups_incomplete"]) == (5, 0)
    assert "| 56.67 | 62.50 | 62.50 | 33.33 | 62.50 | 75.00 | 52.78 |" in benchmark_module("video-mme-v2").format_table(m)


def test_video_mme_v2_unread_reply_scores_minus_one_in_the_group_arithmetic():
    v2 = benchmark_module("video-mme-v2")
    assert [v2.question_score(r, "C") for r in ("C", "The answer is B", "", "no letter here at all in this long reply of many words")] == [1, 0, -1, -1]
    assert v2.relevance_rating([1, 1, -1, 1]) == (100.0 * 4 / 16, 50.0)  # -1 takes one off the sum, not 0
    assert v2.logic_rating([-1, -1, -1, -1], "[[1, 2], 3, 4]") == 100.0  # -1 is truthy in cal_logic's chain
    samples = convert("video-mme-v2")
    trajs = [trajectory(s, "<answer>A</answer>") for s in samples[:6]]  # the second group cut short
    m = v2.benchmark_metrics(trajs, {s.id: s for s in samples})
    assert (m["groups"], m["groups_incomplete"], m["questions"]) == (1, 1, 6)
    s = samples[0]
    assert s.id == "0" and s.video == "/videos/001.mp4" and s.options[7] == "H. option h" and s.answer == "B"
    assert s.metadata["benchmark"]["index"] == 0 and s.metadata["task_kind"] == "Information Retrieval"
    bad = dict(json.loads((DATA / "video_mme_v2/test.jsonl").read_text().splitlines()[4]), group_structure="[1, 2]")
    with pytest.raises(RowError, match="group_structure"):
        benchmark_module("video-mme-v2").convert_record(bad, 0, "x:1", ConvertOptions(), "/v")


def test_cli_convert_and_eval_video_mme_v2(tmp_path, capsys):
    from videoseek.cli import main

    data = tmp_path / "v2.jsonl"
    assert main(["convert", "--from", "video-mme-v2", str(DATA / "video_mme_v2/test.jsonl"), "--out", str(data), "--video-root", str(tmp_path)]) == 0
    assert "wrote 20 samples" in capsys.readouterr().out
    preds = json.loads((DATA / "video_mme_v2/predictions.json").read_text())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "trajectories.jsonl").write_text("".join(trajectory(s, preds[s.id]).model_dump_json() + "\n" for s in VideoSample.from_jsonl(data)))
    (run_dir / "run.json").write_text(json.dumps({"data": [str(data)], "policy": "scripted"}))
    assert main(["eval", str(run_dir), "--benchmark", "video-mme-v2"]) == 0
    assert "| 56.67 | 62.50 | 62.50 | 33.33 | 62.50 | 75.00 | 52.78 |" in capsys.readouterr().out
    written = json.loads((run_dir / "metrics.json").read_text())["benchmark"]
    assert written["name"] == "video-mme-v2" and written["final_rating"]["total"] == pytest.approx(56.66666666666667)


def test_videommmu_matches_lmms_eval_utils():
    m = run("videommmu")
    perception, adaptation = m["tracks"]["perception"], m["tracks"]["adaptation"]
    # videoperception_aggregate_results printed (acc as fractions, 5 decimals):
    #   Perception: Overall 5 / 0.8, Overall-Science 3 / 0.66667, Math 1.0, Physics 0.0, Art 1.0, Art_Theory 1.0
    #   Adaptation: Overall 6 / 0.83333, Overall-Science 3 / 0.66667, Math 0.5, Physics 1.0, Overall-Business 1.0, ...
    assert perception["results"]["Overall"] == {"num": 5, "acc": pytest.approx(80.0)} and perception["api_errors"] == 2
    assert perception["results"]["Overall-Science"] == {"num": 3, "acc": pytest.approx(200 / 3)}
    assert {k: perception["results"][k]["acc"] for k in ("Art", "Art_Theory", "Math", "Physics")} == {"Art": 100.0, "Art_Theory": 100.0, "Math": 100.0, "Physics": 0.0}
    assert perception["results"]["Overall-Business"] == {"num": 0, "acc": 0.0}  # the skipped reply leaves Economics out
    assert adaptation["results"]["Overall"] == {"num": 6, "acc": pytest.approx(500 / 6)} and adaptation["api_errors"] == 0
    assert {k: adaptation["results"][k]["acc"] for k in ("Math", "Physics", "Finance", "Computer_Science", "Clinical_Medicine")} == {
        "Math": 50.0, "Physics": 100.0, "Finance": 100.0, "Computer_Science": 100.0, "Clinical_Medicine": 100.0}  # fmt: skip
    assert "| Perception | 80.0 | 100.0 | 0.0 | 66.7 |" in benchmark_module("videommmu").format_table(m)


def test_videommmu_parsers_are_the_scripts():
    v = benchmark_module("videommmu")
    choices, index2ans = ["A", "B", "C", "D"], {"A": "anemia", "B": "asthma", "C": "angina", "D": "arthritis"}
    # the script's parsed_pred on the hand-made replies
    assert v.parse_multi_choice_response("A. anemia or C. angina; I pick A.", choices, index2ans) == "C"
    assert v.parse_multi_choice_response("joule", ["A", "B", "C", "D"], {"A": "joule"}) == "No Answere Found"
    assert v.parse_multi_choice_response("", choices, index2ans) == "API Error"
    assert set(v.parse_open_response("Therefore the present value is $1,000")) == {1000.0, 0.0, "$1,000"}
    assert set(v.parse_open_response("It has 2 roots.")) == {2.0, "2 roots"}
    samples = {s.id: s for s in convert("videommmu")}
    s = samples["validation_Art_1@perception"]
    assert s.video == "/videos/Art/validation_Art_1.mp4" and s.options == ["A. red", "B. blue", "C. green", "D. black"]
    assert s.question.endswith("\nPlease ignore the Quiz question in last frame of the video.") and s.metadata["benchmark"]["track"] == "perception"
    assert s.metadata["benchmark"]["id"] == "validation_Art_1"  # VideoMMMU's own id, as lmms-eval reports it
    t = samples["test_Math_1@adaptation"]
    assert t.problem_type.value == "free_form" and t.options is None and t.question.startswith(
        "You should watch and learn the video content. Then apply what you learned to answer the following open-ended question.")


def test_videommmu_track_must_be_named(tmp_path):
    from videoseek.envs.sample import DataError

    f = tmp_path / "test.jsonl"
    f.write_text((DATA / "videommmu/Perception/test.jsonl").read_text())
    with pytest.raises(DataError, match="cannot tell the VideoMMMU track"):
        convert_files([f], "videommmu", ConvertOptions())
    bad = tmp_path / "Comprehension"
    bad.mkdir()
    (bad / "test.jsonl").write_text(json.dumps({"id": "validation_Cooking_1", "question": "q", "options": ["a", "b"],
                                                "answer": "A", "question_type": "multiple-choice"}) + "\n")  # fmt: skip
    result = convert_files([bad / "test.jsonl"], "videommmu", ConvertOptions())
    assert result.errors == [f"{bad / 'test.jsonl'}:1: field 'id': subject 'Cooking' is not one of VideoMMMU's 30"]


def test_cli_convert_and_eval_videommmu(tmp_path, capsys):
    from videoseek.cli import main

    data = tmp_path / "vm.jsonl"
    files = [str(DATA / f) for f in FILES["videommmu"]]
    assert main(["convert", "--from", "videommmu", *files, "--out", str(data), "--video-root", str(tmp_path)]) == 0
    assert "wrote 13 samples" in capsys.readouterr().out
    preds = json.loads((DATA / "videommmu/predictions.json").read_text())
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "trajectories.jsonl").write_text("".join(trajectory(s, preds[s.id]).model_dump_json() + "\n" for s in VideoSample.from_jsonl(data)))
    (run_dir / "run.json").write_text(json.dumps({"data": [str(data)], "policy": "scripted"}))
    assert main(["eval", str(run_dir), "--benchmark", "videommmu"]) == 0
    assert "| Adaptation | 83.3 |" in capsys.readouterr().out
    written = json.loads((run_dir / "metrics.json").read_text())["benchmark"]
    assert written["tracks"]["perception"]["results"]["Overall"]["acc"] == pytest.approx(80.0)


def test_videomme_with_subtitles_shows_the_subtitles_of_the_frames(tmp_path, capsys, index_video):
    # Video-MME README: only the subtitles at the sampled frames' times, after "This video's subtitles are listed below:"
    from videoseek.cli import main
    from videoseek.envs.env import EnvConfig, VideoSeekEnv

    subs = tmp_path / "subtitle"
    subs.mkdir()
    (subs / "vmme0001.srt").write_text("1\n00:00:01,000 --> 00:00:03,000\nHi guys,\nwelcome\n\n2\n00:00:09,000 --> 00:00:11,000\n"
                                       "Unseen line\n\n3\n00:00:14,500 --> 00:00:16,000\nLast words\n")  # fmt: skip
    (subs / "vmme0301.srt").write_text("1\nnot a time line\nx\n")
    data = tmp_path / "vmme.jsonl"
    assert main(["convert", "--from", "videomme", str(DATA / "videomme/videomme.jsonl"), "--out", str(data),
                 "--video-root", str(tmp_path), "--subtitles", str(subs)]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert f"field 'subtitles': {subs / 'vmme0301.srt'}:2: expected an SRT time line" in err
    samples = {s.id: s for s in VideoSample.from_jsonl(data)}
    s = samples["001-1"]
    assert s.metadata["subtitles"] == [[1.0, 3.0, "Hi guys, welcome"], [9.0, 11.0, "Unseen line"], [14.5, 16.0, "Last words"]]
    assert all(x.metadata.get("subtitles") == [] for x in samples.values() if x.video.endswith("vmme0601.mp4"))
    sample = s.model_copy(update={"video": str(index_video), "duration": 20.0})
    env = VideoSeekEnv(sample, EnvConfig(initial_frames=4))  # frames at 2.5, 7.5, 12.5, 17.5 s
    obs, _ = env.reset(seed=0)
    assert obs["text"].startswith("This video's subtitles are listed below:\nHi guys, welcome\nVideo duration: 20.0 seconds.")
    assert "Unseen line" not in obs["text"] and "Last words" not in obs["text"]
    obs, *_ = env.step('<tool_call>{"name": "crop_video", "arguments": {"start": 14, "end": 16}}</tool_call>')
    head, _, lines = obs["text"].partition("\nSubtitles at these frames:\n")
    assert head.startswith("crop_video returned") and lines and set(lines.split("\n")) == {"Last words"}  # one line per frame in the cue
    assert main(["convert", "--from", "mvbench", str(DATA / "mvbench/action_sequence.json"), "--out", str(tmp_path / "x.jsonl"),
                 "--subtitles", str(subs)]) == 2  # fmt: skip
    assert "--subtitles goes with --from videomme, video-mme-v2 or videommmu" in capsys.readouterr().err


@pytest.mark.parametrize("module_name", ["videoseek.envs.subtitles", "videoseek.envs.benchmarks.videommmu", "videoseek.envs.benchmarks.charades_timelens"])
def test_converter_docstring_examples(module_name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module_name))
    assert result.attempted and result.failed == 0


def test_video_mme_v2_concatenated_subtitles(tmp_path, capsys, index_video):
    # test_video_mme_v2.py --with-subtitle: WITH_SUB_PROMPT.format(subtitle_concat_all(entries)); no file -> ""
    from videoseek.cli import main
    from videoseek.envs.env import EnvConfig, VideoSeekEnv

    subs = tmp_path / "subtitles"
    subs.mkdir()
    (subs / "001.jsonl").write_text('{"text": "Hello", "start_time": 0.0, "end_time": 0.4}\n{"text": "world.", "start_time": 0.5, "end_time": 0.9}\n')
    (subs / "002.jsonl").write_text('{"text": "ok", "start_time": 0.0, "end_time": 0.4}\nnot json\n')
    data = tmp_path / "v2.jsonl"
    assert main(["convert", "--from", "video-mme-v2", str(DATA / "video_mme_v2/test.jsonl"), "--out", str(data),
                 "--video-root", str(tmp_path), "--subtitles", str(subs)]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert f"field 'subtitles': {subs / '002.jsonl'}:2: invalid JSON" in err  # the four rows of video 002, one line each
    samples = {s.id: s for s in VideoSample.from_jsonl(data)}
    assert len(samples) == 16
    assert samples["0"].metadata["subtitle_prompt"] == "These are the frames of a video. This video's subtitles are listed below:\nHello world.\n"
    assert samples["8"].metadata["subtitle_prompt"] == "These are the frames of a video. This video's subtitles are listed below:\n\n"
    env = VideoSeekEnv(samples["0"].model_copy(update={"video": str(index_video), "duration": 20.0}), EnvConfig(initial_frames=2))
    obs, _ = env.reset(seed=0)
    assert obs["text"].startswith("These are the frames of a video. This video's subtitles are listed below:\nHello world.\nVideo duration: 20.0")


def test_video_mme_v2_interleaved_subtitles(tmp_path, capsys, index_video):
    # test_video_mme_v2.py --with-subtitle --subtitle-interleave: group_subtitle_segments, then per frame the
    # segments overlapping [t_i, t_{i+1}) (the last to the end), "[Subtitle s - e]: text" (checked against the
    # script's functions on random word lists once; the expected lines here follow from them)
    from videoseek.cli import main
    from videoseek.envs.env import EnvConfig, VideoSeekEnv

    subs = tmp_path / "subtitles"
    subs.mkdir()
    words = [("Hello", 1.0, 1.4), ("there.", 1.5, 1.9), ("Later", 12.0, 12.4), ("on", 12.45, 12.8)]
    (subs / "001.jsonl").write_text("".join(json.dumps({"text": w, "start_time": s, "end_time": e}) + "\n" for w, s, e in words))
    data = tmp_path / "v2.jsonl"
    assert main(["convert", "--from", "video-mme-v2", str(DATA / "video_mme_v2/test.jsonl"), "--out", str(data), "--video-root",
                 str(tmp_path), "--subtitles", str(subs), "--subtitle-mode", "interleaved"]) == 0  # fmt: skip
    sample = {s.id: s for s in VideoSample.from_jsonl(data)}["0"]
    assert sample.metadata["subtitle_segments"] == [[1.0, 1.9, "Hello there."], [12.0, 12.8, "Later on"]]
    assert "subtitle_prompt" not in sample.metadata
    env = VideoSeekEnv(sample.model_copy(update={"video": str(index_video), "duration": 20.0}), EnvConfig(initial_frames=4))
    # frames at 2.5, 7.5, 12.5, 17.5 s: "Hello there." ends before the first frame; "Later on" overlaps both
    # [7.5, 12.5) and [12.5, 17.5), so the script shows it after each of those two frames
    obs, _ = env.reset(seed=0)
    assert obs["text"].startswith("[Subtitle 12.00s - 12.80s]: Later on\n[Subtitle 12.00s - 12.80s]: Later on\nThese are the frames of a "
                                  "video with corresponding subtitles shown between frames.")  # fmt: skip
    obs, *_ = env.step('<tool_call>{"name": "crop_video", "arguments": {"start": 0, "end": 3}}</tool_call>')
    assert "\nSubtitles between these frames:\n[Subtitle 1.00s - 1.90s]: Hello there." in obs["text"]
    capsys.readouterr()
    assert main(["convert", "--from", "videomme", str(DATA / "videomme/videomme.jsonl"), "--out", str(tmp_path / "x.jsonl"),
                 "--subtitles", str(subs), "--subtitle-mode", "interleaved"]) == 2  # fmt: skip
    assert "--subtitle-mode goes with --from video-mme-v2 and --subtitles DIR" in capsys.readouterr().err


def test_videommmu_with_transcripts(tmp_path):
    # videoperception_doc_to_text_with_transcript_perception_comprehension / _adaptation
    vm = benchmark_module("videommmu")
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    (transcripts / "validation_Art_1.txt").write_text("  The sky is painted blue.\n")
    opts = ConvertOptions(video_root="/videos", subtitle_dir=str(transcripts))
    samples = {s.id: s for s in convert_files([DATA / f for f in FILES["videommmu"]], "videommmu", opts, strict=True).samples}
    assert samples["validation_Art_1@perception"].question == ("\nTranscript for the Video:\nThe sky is painted blue.\n\nQuestion for the video:\n"
                                                    "What colour is the painted sky?" + vm.PERCEPTION_AND_COMPREHENSION_PROMPT)  # fmt: skip
    assert samples["test_Math_1@adaptation"].question == (vm.PRE_PROMPT + vm.OPEN_ENDED_PROMPT + "\nTranscript for the Video:\n[Transcript not available]"
                                               "\n\nQuestion for the video:\nCompute the area of the triangle in the image.")  # fmt: skip
