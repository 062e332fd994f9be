"""V-STaR (Cheng et al. 2025, "Benchmarking Video-LLMs on Video Spatio-Temporal Reasoning") ->
`VideoSample` rows.

Source: ``V_STaR_test.json`` of github.com/V-STaR-Bench/V-STaR (``data/``, also on the Hugging Face
hub as V-STaR-Bench/V-STaR), a JSON array of records (``data/README.md`` of that repository)::

    {"vid", "domain", "fps", "width", "height", "frame_count", "question", "chain", "object",
     "answer", "temporal_question", "timestamps": [s, e], "spatial_question", "spatial_question_2",
     "bboxes": [{"timestamp", "frame_index", "xmin", "ymin", "xmax", "ymax"}, ...]}

Boxes are in pixels of the ``width`` x ``height`` video, one per annotated whole second.

**One sample per question of the benchmark.** V-STaR's Reverse Spatio-Temporal Reasoning asks every
record five separate questions (``inference_demo.py`` of the repository, commit 1894682): the
open "what" question, then two chains, each a "when" and a "where" question —

- chain 1 (what -> when -> where): ``when1`` asks the temporal question; ``where1`` asks for a box
  per whole second of the true span ``range(ceil(s), floor(e) + 1)``, which the prompt lists;
- chain 2 (what -> where -> when): ``where2`` asks for as many boxes as are annotated, the model
  choosing the seconds; ``when2`` asks the temporal question given the true boxes.

So a record becomes five samples, ids ``{vid}:{step}`` with step in ``what``, ``when1``,
``where1``, ``where2``, ``when2``, each question worded as V-STaR's own prompt, and the model answers
each in its ``<answer>``: free text (what), a ``[start, end]`` span in seconds (when), a JSON object
``{"second": [x1, y1, x2, y2]}`` in the video's pixels (where; the prompt states the resolution).
`videoseek.agents.benchmarks.vstar` reads those answers as V-STaR's scripts do and joins the five
samples of a record again by ``metadata.benchmark.record``.

Every sample keeps the whole record under ``metadata.benchmark`` (ids, domain, the answer, the
timestamps and the boxes exactly as written; the metrics read the truth from there), and carries
the evidence: ``clue_intervals = [timestamps]`` and ``key_frames`` at the boxes' seconds with the
boxes normalised to [0, 1] (clipped to the frame; ``boxes = {object: box}``). ``duration`` is
``frame_count / fps``; clue spans and key frames are clipped to it (the metadata is not).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from videoseek.envs.convert import ConvertOptions, RowError, _build, _jsonable, iter_records, resolve_video
from videoseek.envs.sample import VideoSample

NAME = "vstar"
# The five questions of a record, in V-STaR's asking order (inference_demo.py, test_qwen2_5vl).
STEPS = ("what", "when1", "where1", "where2", "when2")
STEP_CHAIN = {"what": None, "when1": 1, "where1": 1, "where2": 2, "when2": 2}
VIDEO_EXTENSION = ".mp4"  # inference_demo.py's find_video looks for "{vid}.mp4"

FIELDS = {
    "vid": "id '{vid}:{step}' (5 samples a record: what, when1, where1, where2, when2); video '{vid}.mp4' "
    "under --video-root; metadata.benchmark.vid",
    "question": "the 'what' sample's question, worded as V-STaR's VQA prompt (free_form)",
    "answer": "the 'what' sample's answer (scored by V-STaR's judge, see videoseek eval --benchmark vstar)",
    "chain": "the 'what' sample's reference_reasoning (<think> tags stripped)",
    "temporal_question": "the 'when1'/'when2' questions (temporal_grounding; answer '[s, e]'); when2 lists the true boxes",
    "timestamps": "clue_intervals [[s, e]] of every sample; the 'when' answers",
    "spatial_question": "the 'where1' question: a box per whole second of range(ceil(s), floor(e) + 1)",
    "spatial_question_2": "the 'where2' question: as many boxes as are annotated, the model choosing the seconds",
    "bboxes[k]": "key_frames[k] {time: timestamp, boxes: {object: box / [width, height]}}; the 'where' answers "
    "({str(timestamp): [xmin, ymin, xmax, ymax]}, pixels)",
    "object": "the name of the key frames' boxes",
    "fps, frame_count": "duration = frame_count / fps",
    "width, height": "normalise the boxes; stated in the where/when2 prompts",
    "domain": "metadata.benchmark.domain (V-STaR's per-domain breakdown)",
    "everything": "metadata.benchmark (the record as written) + name, step, step_chain (1, 2 or None for what), "
    "record (the record's number in the file)",
}


def iter_source_records(path: Any) -> Iterator[tuple[str, Any]]:
    """Each V-STaR record five times, once per question (``record["__step__"]``), numbered by
    ``record["__record__"]`` (its position in the file, V-STaR's ``idx``); a JSON error is yielded
    once."""
    for number, (location, record) in enumerate(iter_records(path)):
        if not isinstance(record, dict):
            yield location, record
            continue
        for step in STEPS:
            yield f"{location} ({step})", {**record, "__step__": step, "__record__": number}


def _number(record: dict, key: str, positive: bool = True) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RowError(key, f"expected a number, got {value!r}")
    if positive and value <= 0:
        raise RowError(key, f"expected a positive number, got {value!r}")
    return float(value)


def _text(record: dict, key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RowError(key, "missing or empty")
    return value


def _timestamps(record: dict) -> tuple[float, float]:
    ts = record.get("timestamps")
    if not isinstance(ts, (list, tuple)) or len(ts) != 2 or not all(
        isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in ts
    ):
        raise RowError("timestamps", f"expected [start, end] in seconds, got {ts!r}")
    s, e = float(ts[0]), float(ts[1])
    if not 0 <= s <= e:
        raise RowError("timestamps", f"needs 0 <= start <= end, got {list(ts)}")
    return s, e


def _bboxes(record: dict) -> list[dict[str, Any]]:
    boxes = record.get("bboxes")
    if not isinstance(boxes, list) or not boxes:
        raise RowError("bboxes", "expected a non-empty list of {timestamp, xmin, ymin, xmax, ymax}")
    for k, box in enumerate(boxes):
        if not isinstance(box, dict):
            raise RowError(f"bboxes.{k}", f"expected an object, got {type(box).__name__}")
        for key in ("timestamp", "xmin", "ymin", "xmax", "ymax"):
            value = box.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RowError(f"bboxes.{k}.{key}", f"expected a number, got {value!r}")
        if box["timestamp"] < 0:
            raise RowError(f"bboxes.{k}.timestamp", f"expected seconds >= 0, got {box['timestamp']!r}")
        if box["xmin"] > box["xmax"] or box["ymin"] > box["ymax"]:
            raise RowError(f"bboxes.{k}", "needs xmin <= xmax and ymin <= ymax")
    return boxes


def video_length(record: dict) -> float:
    """``round(frame_count / fps, 2)``: the length V-STaR's prompts state and its eval.py bins by."""
    return round(record["frame_count"] / record["fps"], 2)


def box_list(boxes: list[dict[str, Any]]) -> list[list[Any]]:
    """The true boxes as chain 2's temporal prompt lists them: ``[[xmin, ymin, xmax, ymax], ...]``."""
    return [[b["xmin"], b["ymin"], b["xmax"], b["ymax"]] for b in boxes]


def spatial_seconds(timestamps: tuple[float, float]) -> list[int]:
    """Chain 1's seconds: ``range(ceil(s), floor(e) + 1)`` (inference_demo.py, get_answer_spatial)."""
    return list(range(math.ceil(timestamps[0]), math.floor(timestamps[1]) + 1))


def step_question(step: str, record: dict) -> str:
    """The question of `step`, worded as V-STaR's prompts (inference_demo.py, get_answer_*), with the
    box coordinates pinned to the video's pixels (the answers are compared with pixel boxes)."""
    length = video_length(record)
    w, h = record["width"], record["height"]
    if step == "what":
        return f"Answer the question about the video: {record['question']} \n (If the answer is a person, you don't need to identify the person.)"
    if step == "when1":
        return f"This video is {length} seconds long. Answer the question about the video: {record['temporal_question']} \n Output the start and end moment timestamps."
    boxes = box_list(record["bboxes"])
    if step == "when2":
        return (f"This video is {length} seconds long with a resolution of {w}x{h} (width x height). Answer the question about the video: "
                f"{record['temporal_question']} \n There are {len(boxes)} bounding boxes of the key object related to the question in the "
                f"video without knowing the time, which are:{boxes}. Output the start and end moment timestamps.")
    pixels = f"The video's resolution is {w}x{h} (width x height); give the boxes in its pixels."
    if step == "where1":
        seconds = spatial_seconds(_timestamps(record))
        first = seconds[0] if seconds else 0
        return (f"Please answer the question about the video: {record['spatial_question']} with a series of bounding boxes in [x1, y1, x2, y2] format. \n"
                f"For each whole second within the time range {seconds} provided (inclusive of the boundaries), output a series of bounding boxes "
                "of the object in JSON format. The keys should be the whole seconds (as strings), and the values should be the box in "
                f'[x1, y1, x2, y2] format.\nExample output: {{"{first}": [x1, y1, x2, y2],...}}\n{pixels}')
    n = len(boxes)
    return (f"Please answer the question about the video: {record['spatial_question_2']} with a series of bounding boxes in [x1, y1, x2, y2] format. \n"
            f"For each whole second that may related to the question, output a series of bounding boxes of the object in JSON format. You only "
            f"need to output {n} bbox(es). You need to determine which frame is related to the question, and you don't need to output the bbox "
            "for the frames not related to the question.\nThe keys should be the whole seconds (as strings), and the values should be the "
            f'bounding box in [x0,y0,x1,y1] format. \n Example output:\n{{"0": [x0,y0,x1,y1], "1":..., ..., "{n}":...}} (if the frames at '
            f"0~{n} second are related to the questions)\n{pixels}")


def step_answer(step: str, record: dict) -> str:
    """The reference answer of `step`: the record's answer, ``[s, e]`` or ``{second: box}`` (pixels)."""
    if step == "what":
        return str(record["answer"]).strip()
    if step in ("when1", "when2"):
        return json.dumps(list(record["timestamps"]))
    return json.dumps({str(b["timestamp"]): [b["xmin"], b["ymin"], b["xmax"], b["ymax"]] for b in record["bboxes"]})


def _key_frames(record: dict, duration: float) -> list[dict[str, Any]]:
    w, h = float(record["width"]), float(record["height"])
    name = str(record.get("object") or "object").strip() or "object"
    frames: dict[float, dict[str, Any]] = {}
    for b in record["bboxes"]:
        t = min(float(b["timestamp"]), duration)
        box = [min(max(v, 0.0), 1.0) for v in (b["xmin"] / w, b["ymin"] / h, b["xmax"] / w, b["ymax"] / h)]
        frame = frames.setdefault(t, {"time": t, "boxes": {}})
        label = name if name not in frame["boxes"] else f"{name}#{len(frame['boxes']) + 1}"
        frame["boxes"][label] = box
    return [frames[t] for t in sorted(frames)]


def convert_record(record: dict, index: int, location: str, opts: ConvertOptions, root: str) -> VideoSample:
    """One question (``record["__step__"]``) of a V-STaR record -> `VideoSample` (mapping: `FIELDS`)."""
    step = record.get("__step__", "what")
    if step not in STEPS:
        raise RowError("__step__", f"unknown V-STaR step {step!r} (known: {list(STEPS)})")
    source = {k: v for k, v in record.items() if k not in ("__step__", "__record__")}
    vid = _text(source, "vid")
    fps, frame_count = _number(source, "fps"), _number(source, "frame_count")
    _number(source, "width"), _number(source, "height")
    for key in ("question", "answer", "temporal_question"):
        _text(source, key)
    if step == "where1":
        _text(source, "spatial_question")
    if step == "where2":
        _text(source, "spatial_question_2")
    span = _timestamps(source)
    _bboxes(source)
    duration = frame_count / fps
    s, e = min(span[0], duration), min(span[1], duration)
    reasoning = source.get("chain") if step == "what" else None
    if isinstance(reasoning, str):
        reasoning = reasoning.replace("<think>", "").replace("</think>", "").strip() or None
    else:
        reasoning = None
    row = {
        "id": f"{vid}:{step}",
        "video": resolve_video(vid + VIDEO_EXTENSION, root),
        "question": step_question(step, source),
        "options": None,
        "answer": step_answer(step, source),
        "problem_type": "temporal_grounding" if step in ("when1", "when2") else "free_form",
        "duration": duration,
        "clue_intervals": [(s, e)] if e > s else [],
        "reference_reasoning": reasoning,
        "key_frames": _key_frames(source, duration),
        "data_source": NAME,
        "metadata": {
            "task_kind": f"vstar_{step}",
            "benchmark": {
                **{k: _jsonable(v) for k, v in source.items()},
                "name": NAME,
                "step": step,
                "step_chain": STEP_CHAIN[step],
                "record": int(record.get("__record__", index - 1)),
            },
            "converted_from": f"{NAME}:{location}",
        },
    }
    return _build(row)
