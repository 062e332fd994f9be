"""`videoseek convert`: each public format, written the way its project publishes it, converts to
samples that round-trip through `VideoSample.from_jsonl`; bad rows are reported by line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from videoseek.cli import main
from videoseek.envs.convert import ConvertOptions, RowError, convert_files, iter_records, mc_letter, options_from_question
from videoseek.envs.sample import DataError, VideoSample, write_jsonl

# Video-R1-260k / Video-R1-COT-165k records, as in the dataset card (indent 4, "./" paths).
VIDEO_R1 = [
    {
        "problem_id": 2,
        "problem": "What appears on the screen in Russian during the missile's ascent?",
        "data_type": "video",
        "problem_type": "multiple choice",
        "options": ["A. A YouTube subscription notification", "B. A military command", "C. A warning message", "D. A weather update"],
        "process": "<think>Let me think. It resembles a YouTube pop-up.</think>",
        "solution": "<answer>A</answer>",
        "path": "./LLaVA-Video-178K/liwei_youtube_videos/videos/youtube_video_2024/ytb_7nRmsEw7nsE.mp4",
        "data_source": "LLaVA-Video-178K/30_60_s_youtube_v0_1",
    },
    {
        "problem_id": 3,
        "problem": "What is the value of x in the chart?",
        "data_type": "image",
        "problem_type": "numerical",
        "options": [],
        "solution": "<answer>12</answer>",
        "path": "./Chart/chartqa/1.png",
        "data_source": "ChartQA",
    },
    {
        "problem_id": 4,
        "problem": "How many metal objects enter the scene?",
        "data_type": "video",
        "problem_type": "numerical",
        "options": [],
        "solution": "<answer>3</answer>",
        "path": "./CLEVRER/video_10000-11000/video_10234.mp4",
        "data_source": "CLEVRER",
    },
    {
        "problem_id": 5,
        "problem": "What text is written on the sign?",
        "data_type": "video",
        "problem_type": "OCR",
        "options": [],
        "solution": "<answer>OPEN 24 HOURS</answer>",
        "path": "./LLaVA-Video-178K/a.mp4",
        "data_source": "LLaVA-Video-178K",
    },
    {
        "problem_id": 6,
        "problem": "How many metal objects are there?",
        "data_type": "video",
        "problem_type": "numerical",
        "options": [],
        "solution": "<answer>three</answer>",
        "path": "./CLEVRER/b.mp4",
        "data_source": "CLEVRER",
    },
    {
        "problem_id": 7,
        "problem": "What does the person do after opening the fridge?",
        "data_type": "video",
        "problem_type": "free-form",
        "options": [],
        "solution": "<answer>They take out a bottle of milk.</answer>",
        "path": "./STAR/c.mp4",
        "data_source": "STAR",
        "split": "train",
    },
    {
        "problem_id": 8,
        "problem": "How far is the chair from the table (in meters)?",
        "data_type": "video",
        "problem_type": "regression",
        "options": [],
        "solution": "<answer>1.5</answer>",
        "path": "./PerceptionTest/d.mp4",
        "data_source": "PerceptionTest",
    },
]


def _write_json(path: Path, records: list[dict]) -> Path:
    path.write_text(json.dumps(records, indent=4, ensure_ascii=False), encoding="utf-8")
    return path


def _line_of(path: Path, needle: str) -> int:
    """Line of the top-level record containing `needle`: the line of its opening `{` (indent 4)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hit = next(i for i, line in enumerate(lines) if needle in line)
    return next(i for i in range(hit, -1, -1) if lines[i] == "    {") + 1


def _write_parquet(path: Path, records: list[dict]) -> Path:
    """Write records as `datasets`/pandas do: one column per key of any record, None where absent."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = list(dict.fromkeys(k for r in records for k in r))
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in records]), path)
    return path


def _roundtrip(samples: list[VideoSample], out: Path) -> list[VideoSample]:
    """Write and read back; video paths compared normalised (the reader joins '../' unresolved)."""
    write_jsonl(samples, out)
    back = VideoSample.from_jsonl(out)
    for s in back:
        s.video = os.path.normpath(s.video)
    return back


def test_video_r1_json_array(tmp_path):
    src = _write_json(tmp_path / "Video-R1-260k.json", VIDEO_R1)
    root = tmp_path / "Video-R1-data"
    result = convert_files([src], "video-r1", ConvertOptions(video_root=str(root)))

    assert result.skipped == {"image-only row": 1}
    assert len(result.errors) == 1
    bad_line = _line_of(src, "./CLEVRER/b.mp4")
    assert result.errors[0] == f"{src}:{bad_line}: field 'solution': numerical answer is not a number: 'three'"

    back = {s.id: s for s in _roundtrip(result.samples, tmp_path / "out" / "samples.jsonl")}
    assert sorted(back) == ["2", "4", "5", "7", "8"]
    mc = back["2"]
    assert mc.problem_type.value == "multiple_choice" and mc.answer == "A" and len(mc.options) == 4
    assert mc.video == str(root / "LLaVA-Video-178K/liwei_youtube_videos/videos/youtube_video_2024/ytb_7nRmsEw7nsE.mp4")
    assert mc.reference_reasoning == "Let me think. It resembles a YouTube pop-up."
    assert mc.data_source == "LLaVA-Video-178K/30_60_s_youtube_v0_1"
    assert [back[i].problem_type.value for i in ("4", "5", "7", "8")] == ["numerical", "ocr", "free_form", "regression"]
    assert back["4"].answer == "3" and back["4"].options is None
    assert back["5"].answer == "OPEN 24 HOURS"
    assert back["7"].metadata["split"] == "train"  # unknown field kept
    assert back["8"].metadata["converted_from"] == f"video-r1:{src}:{_line_of(src, './PerceptionTest/d.mp4')}"


def test_video_r1_jsonl_and_parquet_agree_with_json(tmp_path):
    pytest.importorskip("pyarrow")
    good = [r for r in VIDEO_R1 if r["problem_id"] != 6]
    as_json = _write_json(tmp_path / "d.json", good)
    as_jsonl = tmp_path / "d.jsonl"
    as_jsonl.write_text("".join(json.dumps(r) + "\n\n" for r in good), encoding="utf-8")  # blank lines are fine
    as_parquet = tmp_path / "d.parquet"
    _write_parquet(as_parquet, good)

    def comparable(path):
        res = convert_files([path], "video-r1", ConvertOptions(video_root="/data"))
        assert res.errors == [] and res.skipped == {"image-only row": 1}
        return [{**s.model_dump(), "metadata": {k: v for k, v in s.metadata.items() if k != "converted_from"}} for s in res.samples]

    reference = comparable(as_json)
    assert len(reference) == 5
    assert comparable(as_jsonl) == reference
    parquet = comparable(as_parquet)
    # parquet unifies the columns: the free-form row's `split` column is None on the other rows
    assert [{**s, "metadata": {k: v for k, v in s["metadata"].items() if v is not None}} for s in parquet] == reference
    locations = [loc for loc, _ in iter_records(as_parquet)]
    assert locations[:2] == [f"{as_parquet}:row 1", f"{as_parquet}:row 2"]


def test_bad_jsonl_line_is_reported_and_others_convert(tmp_path):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps(VIDEO_R1[0]) + "\n{broken\n" + json.dumps({**VIDEO_R1[3], "problem_type": "essay"}) + "\n", encoding="utf-8")
    result = convert_files([src], "video-r1")
    assert [s.id for s in result.samples] == ["2"]
    assert result.errors[0].startswith(f"{src}:2: field 'row': invalid JSON")
    assert result.errors[1].startswith(f"{src}:3: field 'problem_type': unknown problem type 'essay'")
    with pytest.raises(DataError, match=r"d\.jsonl:2: field 'row'"):
        convert_files([src], "video-r1", strict=True)


def test_duplicate_ids_are_renamed(tmp_path):
    src = _write_json(tmp_path / "d.json", [VIDEO_R1[0], VIDEO_R1[0]])
    result = convert_files([src], "video-r1")
    assert [s.id for s in result.samples] == ["2", "2-2"] and result.renamed_ids == 1


# Open-o3-Video STGR records (fields as its trainer and reward functions read them).
OPEN_O3 = [
    {
        "id": "stgr-1",
        "task": "temporal-spatial free-form QA",
        "source": "STR_plm_rdcap",
        "video_path": "sav_017599.mp4",
        "question": "What is the man in the red shirt holding when he turns around?",
        "answer": "A black umbrella.",
        "reasoning_process": "<obj>man</obj><box>[10,20,50,90]</box>at<t>3.2</t>s holds an umbrella.",
        "key_frames": [{"idx": 3, "time": 3.2, "path": "sav_017599/3.jpg"}, {"idx": 7, "time": 7.0, "path": "sav_017599/7.jpg"}],
        "key_items": {"3": {"man": [[0.1, 0.2, 0.5, 0.9]], "umbrella": [[0.3, 0.25, 0.45, 0.6], [0.6, 0.2, 0.7, 0.4]]}, "7": {"man": None}},
        "image_size": [],
        "quality": 0.93,
    },
    {
        "task": "temporal-spatial free-form QA",
        "source": "STR_temporal_grounding",
        "video_path": "charades/ABC12.mp4",
        "question": "Where is the cup?",
        "answer": "On the table.",
        "reasoning_process": "...",
        "key_frames": [{"idx": 0, "time": 0.2}],
        "key_items": {"0": {"cup": [[64, 48, 128, 96]]}},
        "image_size": [640, 480],
    },
    {"task": "temporal QA", "source": "TVG_r1", "video_path": "tvg/x.mp4", "question": "When does the dog jump?", "answer": "[3.5, 7.0]", "reasoning_process": "r"},
    {
        "task": "temporal QA (MCQ)",
        "source": "timerft",
        "video_path": "y.mp4",
        "question": "What happens after the door opens?\nA. A man walks in\nB. A cat runs out\nC. Nothing",
        "answer": "B\n[2.0, 4.5]",
        "reasoning_process": "r",
    },
    {
        "task": "General video QA MCQ",
        "source": "videor1",
        "video_path": "NeXT-QA/z.mp4",
        "question": "Why did the boy fall?\nOptions:\n(A) he slipped\n(B) he was pushed",
        "answer": "A",
        "reasoning_process": "r",
    },
    {"task": "visual QA", "source": "gqa", "image_path": "gqa/1.jpg", "question": "Where is the cat?", "answer": "<obj>cat</obj><box>[1,2,3,4]</box>", "reasoning_process": "r", "image_size": [500, 375]},
    {"task": "temporal-spatial free-form QA", "source": "STR_x", "video_path": "w.mp4", "question": "q", "answer": "a", "key_frames": [{"idx": 1, "time": 1.0}], "key_items": {"1": {"ball": [[5, 5, 10, 10]]}}},
]


def test_open_o3_stgr(tmp_path):
    data_root = tmp_path / "DATA_ROOT"
    (data_root / "videos").mkdir(parents=True)  # Open-o3's layout: the video folder follows `source`
    src = _write_json(data_root / "STGR-RL.json", OPEN_O3)
    result = convert_files([src], "open-o3", ConvertOptions(video_root=str(data_root), keyframe_window=1.0))
    assert result.skipped == {"image-only row": 1}
    assert len(result.errors) == 1
    assert result.errors[0].startswith(f"{src}:{_line_of(src, 'w.mp4')}: field 'key_items.1.ball': box [5, 5, 10, 10] is in pixels but the record has no image_size")

    samples = _roundtrip(result.samples, tmp_path / "samples.jsonl")
    by_task = {s.metadata["task_kind"]: s for s in samples}
    grounded = samples[0]
    assert grounded.id == "stgr-1" and grounded.problem_type.value == "free_form"
    assert grounded.video == str(data_root / "videos/stgr/plm/videos/sav_017599.mp4")
    assert [k.time for k in grounded.key_frames] == [3.2, 7.0]
    assert grounded.key_frames[0].boxes == {"man": [0.1, 0.2, 0.5, 0.9], "umbrella": [0.3, 0.25, 0.45, 0.6], "umbrella#2": [0.6, 0.2, 0.7, 0.4]}
    assert grounded.key_frames[1].boxes == {}  # the None entry parquet/datasets leave behind is dropped
    assert grounded.clue_intervals == [(2.7, 3.7), (6.5, 7.5)]
    assert grounded.metadata["key_frame_paths"] == ["sav_017599/3.jpg", "sav_017599/7.jpg"]
    assert grounded.metadata["quality"] == 0.93
    assert grounded.reference_reasoning.startswith("<obj>man</obj>")

    pixel = samples[1]
    assert pixel.video == str(data_root / "videos/stgr/temporal_grounding/videos/charades/ABC12.mp4")
    assert pixel.key_frames[0].boxes == {"cup": [0.1, 0.1, 0.2, 0.2]}
    assert pixel.clue_intervals == [(0.0, 0.7)]  # window clipped at 0

    tg = by_task["temporal QA"]
    assert tg.problem_type.value == "temporal_grounding" and tg.clue_intervals == [(3.5, 7.0)] and json.loads(tg.answer) == [3.5, 7.0]
    assert tg.video == str(data_root / "videos/tvg_r1/tvg/x.mp4")
    tg_mcq = by_task["temporal QA (MCQ)"]
    assert (tg_mcq.answer, tg_mcq.clue_intervals) == ("B", [(2.0, 4.5)])
    assert tg_mcq.question == "What happens after the door opens?" and tg_mcq.options == ["A. A man walks in", "B. A cat runs out", "C. Nothing"]
    mcq = by_task["General video QA MCQ"]
    assert mcq.question == "Why did the boy fall?" and mcq.options == ["(A) he slipped", "(B) he was pushed"] and mcq.answer == "A"
    assert mcq.video == str(data_root / "videos/videor1/NeXT-QA/z.mp4")


def test_open_o3_parquet_struct_quirk(tmp_path):
    """Written to parquet, `key_items` becomes a struct whose absent keys read back as None."""
    pytest.importorskip("pyarrow")
    records = [dict(OPEN_O3[0]), {**OPEN_O3[0], "id": "stgr-2", "key_items": {"3": {"man": [[0.2, 0.2, 0.4, 0.4]]}}}]
    for r in records:
        r.pop("image_size")
    path = tmp_path / "stgr.parquet"
    _write_parquet(path, records)
    raw = [rec for _, rec in iter_records(path)]
    assert raw[1]["key_items"]["7"] is None and raw[1]["key_items"]["3"]["umbrella"] is None  # the quirk is real
    result = convert_files([path], "open-o3", ConvertOptions(video_root=str(tmp_path)))
    assert result.errors == []
    assert result.samples[1].key_frames[0].boxes == {"man": [0.2, 0.2, 0.4, 0.4]}
    assert result.samples[1].key_frames[1].boxes == {}


def test_moss_style_needs_reference_reasoning(tmp_path):
    records = [
        {
            "qid": "moss-00017",
            "video": "sharegpt4video/abc.mp4",
            "question": "What will the surfer do next?",
            "options": ["A. Fall", "B. Turn", "C. Stop"],
            "answer": "B",
            "reasoning": "The surfer crouches at 00:00:04. His weight shifts left at 00:00:06. He is preparing to turn.",
            "states": [{"object": "surfer", "state": "crouched", "timestamp": "00:00:04"}],
            "clue_intervals": [["00:00:03", "00:00:07"]],
        },
        {"qid": "moss-00018", "video": "b.mp4", "question": "What next?", "answer": "It stops."},
    ]
    src = _write_json(tmp_path / "moss_train.json", records)
    result = convert_files([src], "moss")
    assert result.errors == [f"{src}:{_line_of(src, 'moss-00018')}: field 'reasoning': a MOSS-style record needs a reference reasoning trace"]
    (s,) = _roundtrip(result.samples, tmp_path / "o.jsonl")
    assert s.id == "moss-00017" and s.answer == "B" and s.problem_type.value == "multiple_choice"
    assert s.reference_reasoning.startswith("The surfer crouches") and s.clue_intervals == [(3.0, 7.0)]
    assert s.metadata["states"][0]["state"] == "crouched" and s.data_source == "moss"


def test_videomend_mask_patterns(tmp_path):
    ref_delta = (
        "<think>Reference frame at <time>00:00:00.5</time>: the door is open.\n"
        "From <time_range>00:00:00.5 - 00:00:02.0</time_range>, <delta>the door swings shut</delta>.\n"
        "Reasoning Summary: it closes.</think>"
    )
    records = [
        {
            "problem_id": 101,
            "problem": "What happens to the door?",
            "data_type": "video",
            "problem_type": "multiple choice",
            "options": ["A. It opens", "B. It closes"],
            "solution": "<answer>B</answer>",
            "path": "./chiral/door.mp4",
            "data_source": "chirality",
            "process": ref_delta,
            "mask_patterns": [
                {"zero_frame_indices": [3, 4, 5], "time_range": "0.3 - 0.6", "oracle_correct": True},
                {"zero_frame_indices": [8, 9], "time_range": "0.8 - 1.0", "oracle_correct": "false"},
                {"zero_frame_indices": [1], "time_range": [0.5, 2.0]},
            ],
        },
        {**{k: v for k, v in VIDEO_R1[0].items()}, "problem_id": 102, "mask_patterns": [{"time_range": "0.9 - 0.2", "oracle_correct": True}]},
    ]
    src = _write_json(tmp_path / "grpo_combined_dataset.json", records)
    result = convert_files([src], "videomend")
    assert result.errors == [f"{src}:{_line_of(src, '0.9 - 0.2')}: field 'mask_patterns.0.time_range': time span needs 0 <= start < end, got [0.9, 0.2]"]
    (s,) = _roundtrip(result.samples, tmp_path / "o.jsonl")
    assert [(p.time_range, p.oracle_correct) for p in s.mask_patterns] == [((0.3, 0.6), True), ((0.8, 1.0), False)]
    assert s.metadata["mask_candidates"] == [[0.5, 2.0]]
    assert s.metadata["mask_zero_frame_indices"] == [[3, 4, 5], [8, 9], [1]]
    assert s.reference_reasoning.startswith("Reference frame at <time>00:00:00.5</time>")


def test_multiple_choice_answers_name_a_letter():
    opts = ["A. red", "B. blue"]
    assert [mc_letter(a, opts) for a in ("B", "(B)", "B.", "B. blue", "blue", " Red ")] == ["B", "B", "B", "B", "B", "A"]
    with pytest.raises(RowError, match=r"field 'solution': 'C' is not one of the option letters \['A', 'B'\]"):
        mc_letter("C", opts, "solution")


def test_options_from_question():
    assert options_from_question("Q?\nA. x\nB. y") == ("Q?", ["A. x", "B. y"])
    assert options_from_question("Q?\nB. y\nC. z") == ("Q?\nB. y\nC. z", [])  # not lettered from A
    assert options_from_question("Plain question") == ("Plain question", [])


def test_cli_convert(tmp_path, capsys):
    src = _write_json(tmp_path / "in.json", VIDEO_R1)
    out = tmp_path / "out" / "samples.jsonl"
    assert main(["convert", "--from", "video-r1", str(src), "--out", str(out), "--video-root", str(tmp_path / "data")]) == 0  # good rows written, bad ones named
    captured = capsys.readouterr()
    assert "wrote 5 samples" in captured.out and "1 image-only row" in captured.out
    assert f"{src}:{_line_of(src, './CLEVRER/b.mp4')}: field 'solution'" in captured.err
    assert [s.id for s in VideoSample.from_jsonl(out)] == ["2", "4", "5", "7", "8"]
    assert main(["convert", "--from", "video-r1", str(tmp_path / "nope.json"), "--out", str(out)]) == 2
    assert "input file not found" in capsys.readouterr().err
    assert main(["convert", "--from", "open-o3", str(src), "--out", str(out), "--show-mapping"]) == 0
    assert "key_items" in capsys.readouterr().out
