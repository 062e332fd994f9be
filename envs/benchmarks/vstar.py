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
`videoseek.envs.benchmarks.vstar` reads those answers as V-STaR's scripts do and joins the five
samples of a record again by ``metadata.benchmark.record``.

Every sample keeps the whole record under ``metadata.benchmark`` (ids, domain, the answer, the
timestamps and the boxes exactly as written; the metrics read the truth from there), and carries
the evidence: ``clue_intervals = [timestamps]`` and ``key_frames`` at the boxes' seconds with the
boxes normalised to [0, 1] (clipped to the frame; ``boxes = {object: box}``). ``duration`` is
``frame_count / fps``; clue spans and key frames are clipped to it (the metadata is not).

Official metric. V-STaR metrics as its own ``eval.py`` computes them: Acc, R1@tIoU and m_tIoU, AP@vIoU and m_vIoU
of both chains, AM / LGM per chain and their means mAM and mLGM; overall, by video length
(Short < 60 s <= Medium < 180 s <= Long) and by domain.

Official scripts: ``eval.py`` (metrics) and ``inference_demo.py`` (how answers are read) of
github.com/V-STaR-Bench/V-STaR, commit 1894682b15be0a0c0c5ab24be6e8252743cd6c2f.

A V-STaR record is five samples (see `videoseek.envs.benchmarks.vstar`); their answers are read as
``inference_demo.py`` reads the model's replies:

- what: the answer text as it is (``answer_vqa``), rated 0-3 by a judge against the reference
  answer; rating >= 2 is correct. A record whose what-answer is missing or empty is left out of
  every list, as eval.py's ``continue`` does, but still counts in the overall denominator of the
  rates (eval.py divides the overall ones by ``len(data)``, the per-category ones by the records
  rated);
- when1 / when2: `extract_timestamps` — the numbers in the text, a span only if there are exactly two;
- where1 / where2: `extract_bounding_boxes` — the JSON object (or list) in the text; boxes are used
  as written, in the video's pixels (eval.py compares them with the pixel boxes; the
  de-normalisation helper in inference_demo.py is never called).

**The judge.** eval.py rates the what-answer with Qwen2.5-72B-Instruct (`SYSTEM_PROMPT`,
`USER_TEMPLATE`, the reply read with ``int()``, -1 when it is not an integer). ``judge`` takes any
callable ``(question, groundtruth, candidate) -> reply``; ``videoseek eval --judge SPEC`` builds one
with `videoseek.agents.judge.judge_from_spec` and eval.py's prompts (`JUDGE_PROMPTS`):
``openai:URL[#MODEL]`` (a served judge, ``vllm serve`` / SGLang, over the OpenAI API at temperature
0), ``file:VERDICTS.jsonl`` (the replay of a verdicts file), ``hf:PATH`` or ``vllm:PATH`` (the model
loaded in that process); every LLM judge's reply goes to the run's verdicts file, keyed by the
exact (question, groundtruth, candidate), and is reused from it on re-scoring. Without one, the default is a deterministic
substitute, `rouge_judge`: the rating ``min(3, floor(4 * ROUGE))`` of the repository's ROUGE
(mean of ROUGE-1/2/L F1, `videoseek.rewards.rouge.rouge_avg`), so "correct" means ROUGE >= 0.5.
Its Acc (and so AM, LGM) is not V-STaR's; the grounding metrics do not depend on the judge.
``metrics["judge"]`` says which one was used.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from videoseek.envs.benchmarks._scoring import benchmark_answers
from videoseek.envs.sample import VideoSample
from videoseek.envs.source_records import ConvertOptions, RowError, build_sample, iter_records, jsonable, resolve_video
from videoseek.envs.trajectory import Trajectory

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
                **{k: jsonable(v) for k, v in source.items()},
                "name": NAME,
                "step": step,
                "step_chain": STEP_CHAIN[step],
                "record": int(record.get("__record__", index - 1)),
            },
            "converted_from": f"{NAME}:{location}",
        },
    }
    return build_sample(row)


# The official metric: scoring a run's trajectories as the benchmark's own script does.

TIOU_THRESHOLDS = (0.3, 0.5, 0.7)
VIOU_THRESHOLDS = (0.1, 0.3, 0.5, 0.7, 0.9)
SCRIPT = "V-STaR eval.py @ 1894682"

# eval.py's judge prompt (its `system_prompt` and `tmpl`, eval.py lines 19-33 at 1894682), as written.
SYSTEM_PROMPT = """
As an AI assistant, your task is to evaluate a candidate answer in comparison to a given correct answer.
The question itself, the correct 'groundtruth' answer, and the candidate answer will be provided to you.
Your assessment should range from 0 to 3, \
based solely on the semantic similarity between the groundtruth and the candidate answer, \
disregarding any grammatical differences.
A rating of 0 suggests no similarity, implying the candidate answer is entirely incorrect.
A rating of 1 suggests low similarity, meaning the candidate answer is largely incorrect.
A rating of 2 suggests high similarity, meaning the candidate answer is largely correct.
Lastly, a rating of 3 indicates complete similarity, which means the candidate answer is entirely correct.
Your response should be a single integer from 0, 1, 2, or 3.
"""
USER_TEMPLATE = "Question: {}\nGroundtruth answer: {}\nCandidate answer: {}\nYour response: "
JUDGE_PROMPTS = (SYSTEM_PROMPT, USER_TEMPLATE)  # what `videoseek eval --judge` gives the judge it builds

Judge = Callable[[str, str, str], Any]



# ---- reading the answers (inference_demo.py) ---------------------------------------------------
def extract_timestamps(text: str) -> list[float]:
    """The span in a when-answer: ``[a, b]`` when the text has exactly two numbers, else ``[]``
    (inference_demo.py ``extract_timestamps``; the numbers need not be ordered).

    >>> extract_timestamps("from 3.5 to 7 seconds"), extract_timestamps("at 00:05-00:09")
    ([3.5, 7.0], [])
    """
    found = re.findall(r"\b\d+(?:\.\d+)?\b", text)
    return [float(found[0]), float(found[1])] if len(found) == 2 else []


def _balance(text: str) -> str:
    """Close or open unbalanced brackets (inference_demo.py ``fix_incomplete_json``)."""
    for left, right in (("[", "]"), ("{", "}")):
        gap = text.count(left) - text.count(right)
        text = text + right * gap if gap > 0 else left * -gap + text
    return text


def extract_bounding_boxes(text: str) -> dict[str, Any] | list[Any] | None:
    """The boxes in a where-answer as inference_demo.py ``extract_bounding_boxes`` reads them: the
    first fenced ```json block, else everything from the first ``[``/``{`` to the last ``]``/``}``;
    single quotes become double; parsed as JSON. A list of objects is merged into one object, a
    list of ``[second, box]`` pairs becomes ``{str(second): box}``; when that fails, the text with
    its brackets balanced is parsed again and returned as it is. None when nothing parses.

    >>> extract_bounding_boxes('The box: {"3": [10, 20, 50, 60]}')
    {'3': [10, 20, 50, 60]}
    """
    m = re.search(r"```json\s*\n(\[.*?\]|\{.*?\})\s*\n```", text, re.DOTALL) or re.search(r"(\[[\s\S]*\]|\{[\s\S]*\})", text, re.DOTALL)
    if not m:
        return None
    raw = m.group(1).strip().replace("'", '"')
    try:
        boxes = json.loads(raw)
        if isinstance(boxes, list) and all(isinstance(item, dict) for item in boxes):
            merged: dict[str, Any] = {}
            for item in boxes:
                merged.update(item)
            boxes = merged
        if isinstance(boxes, list):
            return {str(pair[0]): pair[1] for pair in boxes}
        return dict(boxes) if isinstance(boxes, dict) else None
    except Exception:
        try:
            boxes = json.loads(_balance(raw))
        except Exception:
            return None
        return boxes if isinstance(boxes, (list, dict)) else None


# ---- scores (eval.py) --------------------------------------------------------------------------
def temporal_iou(gt: Sequence[float], pred: Any) -> float:
    """eval.py ``calculate_temporal_iou``: 0 unless `pred` is two numbers; intersection over the
    hull ``max(ends) - min(starts)`` (a reversed prediction is not reordered).

    >>> temporal_iou([2, 6], [4, 8])
    0.3333333333333333
    """
    if not pred:
        return 0.0
    if isinstance(pred, str):
        try:
            pred = ast.literal_eval(pred)
        except (ValueError, SyntaxError):
            return 0.0
    if not isinstance(pred, (list, tuple)) or len(pred) != 2 or not all(isinstance(x, (int, float)) for x in pred):
        return 0.0
    inter = max(0, min(gt[1], pred[1]) - max(gt[0], pred[0]))
    union = max(gt[1], pred[1]) - min(gt[0], pred[0])
    return inter / union if union > 0 else 0.0


def box_iou(gt: dict[str, float], pred: Any) -> float:
    """eval.py ``compute_iou``: IoU of a ``{xmin, ymin, xmax, ymax}`` truth and an [x1, y1, x2, y2]
    prediction (0 when the prediction is not 4 values)."""
    if not isinstance(pred, (list, tuple)) or len(pred) != 4:
        return 0.0
    ix = max(0, min(gt["xmax"], pred[2]) - max(gt["xmin"], pred[0]))
    iy = max(0, min(gt["ymax"], pred[3]) - max(gt["ymin"], pred[1]))
    inter = ix * iy
    union = (gt["xmax"] - gt["xmin"]) * (gt["ymax"] - gt["ymin"]) + (pred[2] - pred[0]) * (pred[3] - pred[1]) - inter
    return inter / union if union > 0 else 0.0


def frame_iou(gt: dict[str, float], pred: Any) -> float:
    """eval.py ``calculate_bbox_iou``: a box, or the best of several boxes, for one frame; 0 for
    anything that is not numbers."""
    try:
        if not pred:
            return 0.0
        if isinstance(pred[0], (int, float)) and len(pred) == 4:
            pred = [pred]
        return max(box_iou(gt, p) for p in pred)
    except Exception:
        return 0.0


def spatial_metrics(gt_boxes: list[dict[str, Any]], pred: Any) -> tuple[list[float], float]:
    """eval.py ``calculate_spatial_metrics``: per annotated frame (key ``str(timestamp)``) the IoU
    of the predicted box, 0 for a frame with none; returns (share of frames with IoU >= m for m in
    0.1, 0.3, 0.5, 0.7, 0.9 — the "AP@vIoU=m" — and the mean IoU, m_vIoU)."""
    if not pred:
        return [0.0] * len(VIOU_THRESHOLDS), 0.0
    ious = []
    for gt in gt_boxes:
        key = str(gt["timestamp"])
        ious.append(frame_iou(gt, pred[key]) if isinstance(pred, dict) and key in pred else 0.0)
    miou = float(np.mean(ious)) if ious else 0.0
    aps = [float(np.mean([1 if v >= thr else 0 for v in ious])) if ious else 0.0 for thr in VIOU_THRESHOLDS]
    return aps, miou


def judge_rating(reply: Any) -> int:
    """eval.py's reading of the judge's reply: ``int(reply)``, -1 when that fails."""
    try:
        return int(reply)
    except (ValueError, TypeError):
        return -1


def rouge_judge(question: str, groundtruth: str, candidate: str) -> str:
    """The offline substitute for eval.py's Qwen2.5-72B judge: ``min(3, floor(4 * ROUGE))`` with
    ROUGE the mean ROUGE-1/2/L F1 of `candidate` against `groundtruth` (the question is unused).

    >>> rouge_judge("q", "a red car", "a red car"), rouge_judge("q", "a red car", "blue")
    ('3', '0')
    """
    from videoseek.rewards.rouge import rouge_avg

    return str(min(3, int(4 * rouge_avg(candidate, groundtruth))))


# ---- aggregation (eval.py evaluate_json, print_stats) ------------------------------------------
def length_bin(video_length: float) -> str:
    """eval.py's length bins: Short < 60 s, Medium < 180 s, else Long."""
    return "Short" if video_length < 60 else ("Medium" if video_length < 180 else "Long")


def _new_stats() -> dict[str, Any]:
    lists = ("all_rating", "valid_rating", "tiou1", "tiou2", "viou1", "viou2")
    stats: dict[str, Any] = {k: [] for k in lists}
    stats["aps1"] = [[] for _ in VIOU_THRESHOLDS]
    stats["aps2"] = [[] for _ in VIOU_THRESHOLDS]
    stats["correct"] = 0
    stats["combined"] = {k: [0, 0] for k in ("vqa_temp", "vqa_spat", "temp_spat", "vqa_temp_spat")}
    return stats


def _lgm(terms: Sequence[float]) -> float | None:
    """-(mean of log(1 - x)); None where a term is 1 (eval.py's math.log(0) raises there)."""
    if any(x >= 1 for x in terms):
        return None
    return -sum(math.log(1 - x) for x in terms) / 3


def _summary(stats: dict[str, Any], total: int) -> dict[str, Any]:
    """eval.py ``print_stats`` for one group: every number it prints, by the same formulas."""
    acc = stats["correct"] / total
    out: dict[str, Any] = {
        "n": total,
        "avg_all_score": float(np.mean(stats["all_rating"])) if stats["all_rating"] else None,
        "avg_valid_score": float(np.mean(stats["valid_rating"])) if stats["valid_rating"] else 0,
        "acc": acc,
    }
    for c in (1, 2):
        tious, chain = stats[f"tiou{c}"], {}
        for thr in TIOU_THRESHOLDS:
            chain[f"R1@{thr}"] = float(np.mean([1 if v >= thr else 0 for v in tious]))
        chain["m_tIoU"] = float(np.mean(tious))
        for thr, aps in zip(VIOU_THRESHOLDS, stats[f"aps{c}"]):
            chain[f"AP@{thr}"] = float(np.mean(aps))
        chain["m_vIoU"] = float(np.mean(stats[f"viou{c}"]))
        chain["AM"] = (acc + chain["m_tIoU"] + chain["m_vIoU"]) / 3
        chain["LGM"] = _lgm((acc, chain["m_tIoU"], chain["m_vIoU"]))
        out[f"chain{c}"] = chain
    out["mAM"] = (out["chain1"]["AM"] + out["chain2"]["AM"]) / 2
    lgms = (out["chain1"]["LGM"], out["chain2"]["LGM"])
    out["mLGM"] = None if None in lgms else (lgms[0] + lgms[1]) / 2
    out["combined"] = {k: [v[0] / total, v[1] / total] for k, v in stats["combined"].items()}
    return out


def benchmark_metrics(trajectories: Sequence[Trajectory], samples: dict[str, VideoSample], judge: Judge | None = None,
                      judge_name: str | None = None) -> dict[str, Any]:
    """V-STaR's numbers as eval.py ``evaluate_json`` computes them (V-STaR-Bench/V-STaR @ 1894682).

    Per record: the what-answer's rating (``judge``, default `rouge_judge`; correct when >= 2),
    both chains' temporal IoU (`temporal_iou` of `extract_timestamps`) and spatial AP / mean IoU
    (`spatial_metrics` of `extract_bounding_boxes`). Per group: Acc = correct / records; R1@m =
    share of records with tIoU >= m; m_tIoU, m_vIoU and AP@m their means; AM = (Acc + m_tIoU +
    m_vIoU) / 3 and LGM = -(log(1 - Acc) + log(1 - m_tIoU) + log(1 - m_vIoU)) / 3 per chain; mAM
    and mLGM the means over the two chains; "combined": shares of records correct and grounded
    (rating >= 2, tIoU >= 0.3, m_vIoU >= 0.1, each pair and all three), per chain. The records
    are those with an answered sample in the run; a step without an episode has an empty answer.
    A judge with a ``many(triples)`` method is asked every what-answer at once, and its
    ``summary()`` (the verdict file, replies asked and reused) is ``metrics["verdicts"]``;
    ``metrics["judge"]`` is `judge_name` (default: the judge's ``__name__``).
    """
    judge_name = judge_name or (getattr(judge, "__name__", "custom") if judge is not None else "rouge_judge")
    judge = judge or rouge_judge
    answers = benchmark_answers(trajectories, samples, NAME)
    records: dict[tuple[int, str], dict[str, Any]] = {}
    for sample, text in answers.values():
        bench = sample.metadata["benchmark"]
        rec = records.setdefault((int(bench["record"]), str(bench["vid"])), {"bench": bench, "answers": {}})
        rec["answers"][bench["step"]] = text
    # eval.py: `if 'answer_vqa' in item and item['answer_vqa']: ... else: continue`
    rated_keys = [k for k in sorted(records) if records[k]["answers"].get("what")]
    triples = [(str(records[k]["bench"]["question"]), str(records[k]["bench"]["answer"]), records[k]["answers"]["what"]) for k in rated_keys]
    many = getattr(judge, "many", None)
    replies = many(triples) if many is not None else [judge(*t) for t in triples]
    overall, by_length, by_domain = _new_stats(), {}, {}
    for key, reply in zip(rated_keys, replies):
        bench, got = records[key]["bench"], records[key]["answers"]
        length = round(bench["frame_count"] / bench["fps"], 2)
        groups = [overall, by_length.setdefault(length_bin(length), _new_stats()),
                  by_domain.setdefault(str(bench.get("domain", "unknown")), _new_stats())]
        rating = judge_rating(reply)
        tious = [temporal_iou(bench["timestamps"], extract_timestamps(got.get(s) or "")) for s in ("when1", "when2")]
        spatial = [spatial_metrics(bench["bboxes"], extract_bounding_boxes(got.get(s) or "")) for s in ("where1", "where2")]
        for st in groups:
            st["all_rating"].append(rating if rating != -1 else 0)
            if rating != -1:
                st["valid_rating"].append(rating)
            st["correct"] += rating >= 2
            for c in (1, 2):
                aps, viou = spatial[c - 1]
                st[f"tiou{c}"].append(tious[c - 1])
                st[f"viou{c}"].append(viou)
                for i, ap in enumerate(aps):
                    st[f"aps{c}"][i].append(ap)
                ok_q, ok_t, ok_s = rating >= 2, tious[c - 1] >= 0.3, viou >= 0.1
                comb = st["combined"]
                comb["vqa_temp"][c - 1] += ok_q and ok_t
                comb["vqa_spat"][c - 1] += ok_q and ok_s
                comb["temp_spat"][c - 1] += ok_t and ok_s
                comb["vqa_temp_spat"][c - 1] += ok_q and ok_t and ok_s
    rated = len(overall["all_rating"])
    out: dict[str, Any] = {"benchmark": NAME, "records": len(records), "rated": rated, "judge": judge_name, "script": SCRIPT}
    if hasattr(judge, "summary"):
        out["verdicts"] = judge.summary()
    if not rated:
        out["overall"] = None
        out["by_length"], out["by_domain"] = {}, {}
        return out
    # eval.py: the overall rates over len(data) (every record), each category's over its rated records.
    out["overall"] = _summary(overall, len(records))
    out["by_length"] = {k: _summary(v, len(v["all_rating"])) for k, v in by_length.items()}
    out["by_domain"] = {k: _summary(v, len(v["all_rating"])) for k, v in by_domain.items()}
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def format_table(metrics: dict[str, Any]) -> str:
    """V-STaR's tables (paper Tab. 2 / the leaderboard), in percent: the main one — What Acc, When
    m_tIoU and Where m_vIoU of each chain, mAM, mLGM — overall, by length and by domain; then each
    chain's R1@tIoU and AP@vIoU."""
    if not metrics.get("overall"):
        return "V-STaR: no record with a what-answer to rate."
    groups = [("Overall", metrics["overall"])]
    groups += [(f"Length: {k}", v) for k, v in metrics["by_length"].items()]
    groups += [(f"Domain: {k}", v) for k, v in metrics["by_domain"].items()]
    lines = ["| V-STaR | n | Acc | Chain 1 m_tIoU | Chain 1 m_vIoU | Chain 2 m_tIoU | Chain 2 m_vIoU | mAM | mLGM |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, g in groups:
        cells = [_pct(g["acc"]), _pct(g["chain1"]["m_tIoU"]), _pct(g["chain1"]["m_vIoU"]),
                 _pct(g["chain2"]["m_tIoU"]), _pct(g["chain2"]["m_vIoU"]), _pct(g["mAM"]), _pct(g["mLGM"])]
        lines.append(f"| {label} | {g['n']} | " + " | ".join(cells) + " |")
    lines += ["", "| V-STaR (overall) | R1@0.3 | R1@0.5 | R1@0.7 | m_tIoU | AP@0.1 | AP@0.3 | AP@0.5 | AP@0.7 | AP@0.9 | m_vIoU |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in (1, 2):
        ch = metrics["overall"][f"chain{c}"]
        keys = [f"R1@{t}" for t in TIOU_THRESHOLDS] + ["m_tIoU"] + [f"AP@{t}" for t in VIOU_THRESHOLDS] + ["m_vIoU"]
        lines.append(f"| Chain {c} | " + " | ".join(_pct(ch[k]) for k in keys) + " |")
    note = f"Judge: {metrics['judge']}"
    if metrics["judge"] == "rouge_judge":
        note += " (offline substitute for V-STaR's Qwen2.5-72B judge: Acc, AM and LGM are not comparable with the paper's)"
    note += f"; {metrics['rated']} of {metrics['records']} records rated"
    if metrics.get("verdicts"):
        v = metrics["verdicts"]
        note += f"; verdicts {v['file']} ({v['asked']} asked, {v['reused']} reused)"
    lines += ["", note + "."]
    return "\n".join(lines)
