"""Answer accuracy by problem type, as Video-R1 defines it (the accuracy reward every seed uses).

Video-R1 (Feng et al. 2025, `accuracy_reward` in its GRPO script), reused by MOSS-ChatV (seed 000,
eq. 3), VideoMend (seed 002, r_acc), Open-o3-Video-v2 (seed 003) and ProcessThinker (seed 004):

- multiple_choice: 1 if the chosen option letter equals the answer letter. Tolerant of how the
  letter is written ("B", "(B)", "B. text", "B) text", "Answer: B") and of the option text alone.
- numerical: 1 if both numbers are equal after rounding to 2 decimals ("1,234" reads 1234).
- ocr: 1 − word error rate (word-level Levenshtein / reference words), clipped to [0, 1].
- free_form: mean of the ROUGE-1/2/L F-measures (Porter stemming), clipped to [0, 1].
- regression: 1 − clip(relative error, 0, 1), relative error (|ŷ−y| + 1e-9) / (|y| + 1e-9).
- temporal_grounding: temporal IoU of the predicted and true "from s to e" / "[s, e]" spans.

Video-R1 also rejects a numerical answer when exactly one of the two strings contains a decimal
point ("3" vs "3.0"); `strict_decimal=True` restores that, the default compares numbers.

>>> class S:  # any object with these attributes works; VideoSample is the real type
...     problem_type, answer, options = "multiple_choice", "B", ["A. red", "B. blue"]
>>> accuracy_reward("(B) blue", S), accuracy_reward("blue", S), accuracy_reward("A", S)
(1.0, 1.0, 0.0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from .tags import last_block
from .intervals import tiou
from .rouge import rouge_avg
from .timestamps import parse_span

# Content stripped in Python: `<answer>\s*(.*?)\s*</answer>` backtracks quadratically on spaces.
# Optional lead-in ("Answer:", "The answer is", "Option"), then the letter, optionally in brackets,
# then a delimiter or the end. A bare upper-case letter may be followed by a space ("B blue").
# Each optional word carries its own trailing `\s*`: adjacent `\s*` runs ("\s*(?:is)?\s*[:：]?\s*")
# match the same texts but backtrack cubically on a long run of spaces.
_LEAD = r"^\s*(?:(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice)\s*(?:is\s*)?(?:[:：]\s*)?)?"
_LETTER_BRACKETED = re.compile(_LEAD + r"[\(\[]\s*([A-Za-z])\s*[\)\]]", re.IGNORECASE)
_LETTER_DELIMITED = re.compile(_LEAD + r"([A-Za-z])\s*(?:[\.\):：,]|$)", re.IGNORECASE)
_LETTER_SPACED = re.compile(_LEAD + r"([A-Z])\s+\S", re.IGNORECASE)
# "B or C", "B, C", "B/C": naming a second option right after the first is a hedge, not a choice.
_HEDGE = re.compile(r"\s*(?:[,/&]|\bor\b|\band\b)\s*[\(\[]?([A-Z])(?![A-Za-z])")
_OPTION_PREFIX = re.compile(r"^\s*[\(\[]?\s*([A-Za-z])\s*[\)\]\.:：]\s*")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")

PROBLEM_TYPES = ("multiple_choice", "numerical", "free_form", "ocr", "regression", "temporal_grounding")
# Spellings seen in public datasets (Video-R1's "multiple choice", "OCR", "free-form"; "open-ended",
# "numeric", "mcq", ...), after case, spaces and hyphens are folded to `_`. The one table: the
# sample model (`envs/sample.py`, `ProblemType`) reads it too.
_ALIASES = {
    "multiplechoice": "multiple_choice", "multi_choice": "multiple_choice", "mcq": "multiple_choice", "mc": "multiple_choice",
    "freeform": "free_form", "open_ended": "free_form", "openended": "free_form", "open": "free_form",
    "numeric": "numerical", "number": "numerical",
    "grounding": "temporal_grounding", "tvg": "temporal_grounding",
}  # fmt: skip


def problem_type_name(value: str) -> str | None:
    """The canonical problem-type name of a spelling ("Multiple choice", "free-form", "OCR"), or None.

    >>> problem_type_name("Multiple choice"), problem_type_name("open-ended"), problem_type_name("essay")
    ('multiple_choice', 'free_form', None)
    """
    key = "_".join(value.strip().lower().replace("-", " ").split())
    name = _ALIASES.get(key, key)
    return name if name in PROBLEM_TYPES else None


def normalize_problem_type(problem_type: Any) -> str:
    """The canonical problem-type name of an enum member or a string such as "multiple choice".

    >>> normalize_problem_type("OCR"), normalize_problem_type("free-form")
    ('ocr', 'free_form')
    """
    name = problem_type_name(str(getattr(problem_type, "value", problem_type)))
    if name is None:
        raise ValueError(f"problem_type: unknown value {problem_type!r}; expected one of {', '.join(PROBLEM_TYPES)}")
    return name


def strip_answer_tags(text: str) -> str:
    """The content of the last `<answer>…</answer>` if `text` has one, else `text` stripped (linear time)."""
    found = last_block(text, "answer")
    return (text if found is None else found).strip()


def _option_texts(options: Sequence[str] | None) -> dict[str, str]:
    """Letter -> option text without its "A. " prefix (letters by position when unprefixed)."""
    out: dict[str, str] = {}
    for k, opt in enumerate(options or []):
        m = _OPTION_PREFIX.match(opt)
        if m:
            out[m.group(1).upper()] = opt[m.end():].strip()
        else:
            out[chr(ord("A") + k)] = opt.strip()
    return out


def _norm_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().strip(".。").strip().casefold()


def extract_choice(text: str, options: Sequence[str] | None = None) -> str | None:
    """The option letter an answer names, or None.

    A letter counts only if it is one of the options' letters (when options are given); the
    option's text alone ("blue") also names its letter; a hedge ("B or C") names none. Lower-case letters count only when
    bracketed or delimited ("b)", "(b)", "b"), so "a dog" is not option A.

    >>> extract_choice("B. blue"), extract_choice("Answer: (c)"), extract_choice("a dog")
    ('B', 'C', None)
    """
    text = strip_answer_tags(text)
    letters = _option_texts(options)
    valid = set(letters) if letters else None
    for pattern in (_LETTER_BRACKETED, _LETTER_DELIMITED, _LETTER_SPACED):
        m = pattern.match(text)
        if m:
            letter = m.group(1)
            if pattern is _LETTER_SPACED and not letter.isupper():
                continue
            if valid is not None and letter.upper() not in valid:
                continue
            hedge = _HEDGE.match(text, m.end() if pattern is _LETTER_BRACKETED else m.end(1))
            if hedge and hedge.group(1) != letter.upper() and (valid is None or hedge.group(1) in valid):
                return None
            return letter.upper()
    norm = _norm_text(text)
    for letter, option in letters.items():
        if norm and norm == _norm_text(option):
            return letter
    return None


def parse_number(text: str) -> float | None:
    """The single number an answer states ("1,234.5", "about 42 m", "-3e2"); None if none or several.

    >>> parse_number("about 1,234.5 m"), parse_number("3 or 4"), parse_number("none")
    (1234.5, None, None)
    """
    found = _NUMBER.findall(strip_answer_tags(text))
    if len(found) != 1:
        return None
    value = float(found[0].replace(",", ""))
    return value if math.isfinite(value) else None


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance / number of reference words (whitespace tokens, as Video-R1).

    >>> word_error_rate("the quick brown fox", "the quick brown box")
    0.25
    """
    ref, hyp = reference.split(), hypothesis.split()
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            current[j] = previous[j - 1] if r == h else 1 + min(previous[j], current[j - 1], previous[j - 1])
        previous = current
    return previous[-1] / max(1, len(ref))


def multiple_choice_accuracy(prediction: str, answer: str, options: Sequence[str] | None) -> float:
    """1.0 if the predicted letter is the answer's letter."""
    truth = extract_choice(answer, options) or answer.strip().upper()
    return 1.0 if extract_choice(prediction, options) == truth else 0.0


def numerical_accuracy(prediction: str, answer: str, strict_decimal: bool = False) -> float:
    """1.0 if the numbers agree after rounding to 2 decimals.

    >>> numerical_accuracy("3.141", "3.14"), numerical_accuracy("3", "3.0"), numerical_accuracy("3", "3.0", True)
    (1.0, 1.0, 0.0)
    """
    if strict_decimal and (("." in prediction or "," in prediction) != ("." in answer or "," in answer)):
        return 0.0
    pred, truth = parse_number(prediction), parse_number(answer)
    if pred is None or truth is None:
        return 0.0
    return 1.0 if round(pred, 2) == round(truth, 2) else 0.0


def regression_accuracy(prediction: str, answer: str) -> float:
    """1 − clip(relative error, 0, 1) with Video-R1's 1e-9 guards.

    >>> round(regression_accuracy("9", "10"), 6), regression_accuracy("30", "10")
    (0.9, 0.0)
    """
    pred, truth = parse_number(prediction), parse_number(answer)
    if pred is None or truth is None:
        return 0.0
    relative = (abs(pred - truth) + 1e-9) / (abs(truth) + 1e-9)
    return 1.0 - min(1.0, max(0.0, relative))


def temporal_grounding_accuracy(prediction: str, answer: str) -> float:
    """tIoU of the predicted and true spans; 0 when either has no parseable, ordered span.

    >>> temporal_grounding_accuracy("from 2 to 6", "[4, 8]")
    0.3333333333333333
    """
    pred, truth = parse_span(prediction), parse_span(answer)
    if pred is None or truth is None or pred[1] <= pred[0] or truth[1] <= truth[0]:
        return 0.0
    return tiou([pred], [truth])


def accuracy_reward(prediction: str | None, sample: Any, strict_decimal: bool = False) -> float:
    """Accuracy of `prediction` (the text inside `<answer>`) for `sample`, in [0, 1].

    `sample` needs `problem_type`, `answer` and, for multiple choice, `options`. A missing
    prediction scores 0; an unknown problem type raises ValueError naming the field.
    """
    kind = normalize_problem_type(sample.problem_type)
    if prediction is None:
        return 0.0
    pred = strip_answer_tags(str(prediction))
    answer = strip_answer_tags(str(sample.answer))
    if kind == "multiple_choice":
        return multiple_choice_accuracy(pred, answer, getattr(sample, "options", None))
    if kind == "numerical":
        return numerical_accuracy(pred, answer, strict_decimal)
    if kind == "ocr":
        return min(1.0, max(0.0, 1.0 - word_error_rate(answer, pred)))
    if kind == "free_form":
        return min(1.0, max(0.0, rouge_avg(pred, answer)))
    if kind == "regression":
        return regression_accuracy(pred, answer)
    return temporal_grounding_accuracy(pred, answer)
