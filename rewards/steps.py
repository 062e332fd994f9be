"""Splitting reasoning into steps, offline: a rule-based sentence splitter (default) or pysbd.

MOSS-ChatV (seed 000, eqs. 6–7) segments the generated and the reference reasoning into
sentence steps "using NLP tools (e.g. nltk)". nltk's punkt model cannot be downloaded here, so:

- `split_sentences(text, method="regex")` (default): break after . ! ? (and 。！？) followed by
  white space and a capital, digit, quote, bracket or tag, or at a line break; never inside a
  number ("3.5"), a clock time ("00:01:02.5"), after a title or Latin abbreviation ("Dr.",
  "e.g.", "vs.", "approx."; "No." and "Fig." before a number) or a single initial ("J. Smith").
- `method="pysbd"`: pysbd's English rules (offline, pure Python), line by line.

Why the regex is the default (measured here): on the 20 labelled cases of
tests/rewards/test_steps.py the regex splits all 20 as labelled and pysbd 19 (it breaks after
"approx."); on bench/bench_prr.py's 20-sentence traces both split every trace the same, but
pysbd costs 13–15 ms of CPU per trace against about 0.045 ms (300× or more), alone far more
than a whole PRR reward. ProcessThinker's explicit `<step>…</step>`
tags (seed 004, eq. 1) take precedence over sentence splitting when present.

>>> split_sentences("At 00:01:02.5 the cup is 3.5 cm away, e.g. near Dr. Li. Then it falls! Done")
['At 00:01:02.5 the cup is 3.5 cm away, e.g. near Dr. Li.', 'Then it falls!', 'Done']
>>> split_steps("<think><step>look</step><step>answer B</step></think>")
['look', 'answer B']
"""

from __future__ import annotations

import re
from functools import lru_cache

from .tags import tag_blocks

ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs v e.g i.e approx cf al ca inc ltd co dept "
    "jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k".split()
)
# Abbreviations only before a number ("No. 5", "Fig. 3"): "the answer is no. Then" ends a sentence.
NUMBER_ABBREVIATIONS = frozenset("no nos fig figs p pp vol ch sec eq eqs".split())
# Candidate boundary, anchored on one terminator so the scan is a fast character-set search:
# an ASCII . ! ? (more terminators, closing quotes/brackets) then white space and a sentence
# start; or a CJK full stop, which ends a sentence with or without a following space.
# The ASCII branch starts only at the first terminator of a run: a later start in the same run
# sees the same suffix and fails the same way, and retrying it made "....x" quadratic.
_BOUNDARY = re.compile(
    r"(?<![.!?])[.!?](?P<more>[.!?]*)[\"'’”)\]]*(?P<space>\s+)(?=[\"'“‘(\[<]?[A-Z0-9<])"
    r"|[。！？][。！？]*[”’」』)]*\s*"
)
_WORD = re.compile(r"\w")


def _last_word(line: str, lo: int, hi: int) -> str:
    """`line[lo:hi].rsplit(None, 1)[-1]` ("" when blank) without copying all of `line[lo:hi]`.

    The window grows leftwards from `hi` until it holds white space before the word, so the cost
    is about the word's length: a line of "Dr. Dr. Dr. …" (every '.' an abbreviation, the piece
    never closed) no longer copies the whole growing piece at each '.'.
    """
    size = 32
    while True:
        a = max(lo, hi - size)
        words = line[a:hi].rsplit(None, 1)
        if a == lo or len(words) == 2:
            return words[-1] if words else ""
        size *= 2


def _is_abbreviation(word: str, next_char: str) -> bool:
    """Whether the last word before a '.' is an abbreviation or a single initial."""
    if not word:
        return False
    raw = word.lstrip("\"'“‘([")
    token = raw.rstrip(".").lower()
    if token in ABBREVIATIONS or (token in NUMBER_ABBREVIATIONS and next_char.isdigit()):
        return True
    return len(raw) == 1 and raw.isalpha() and raw.isupper()  # "J. Smith"


def _split_line_regex(line: str) -> list[str]:
    pieces, start = [], 0
    for m in _BOUNDARY.finditer(line):
        if m.group("space") is not None:
            # a lone "." may end an abbreviation rather than a sentence
            if line[m.start()] == "." and not m.group("more") and _is_abbreviation(_last_word(line, start, m.start()), line[m.end() : m.end() + 1]):
                continue
            end = m.start("space")
        else:
            end = m.end()
        pieces.append(line[start:end])
        start = m.end()
    pieces.append(line[start:])
    return pieces


@lru_cache(maxsize=1)
def _pysbd_segmenter():
    import pysbd  # imported on first use: the regex splitter needs nothing

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str, method: str = "regex") -> list[str]:
    """Sentences of `text`, stripped; pieces without a word character are dropped.

    `method` is "regex" (default) or "pysbd". Line breaks always separate sentences.
    """
    if method not in ("regex", "pysbd"):
        raise ValueError(f"method: expected 'regex' or 'pysbd', got {method!r}")
    out: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        pieces = _split_line_regex(line) if method == "regex" else _pysbd_segmenter().segment(line)
        out.extend(p.strip() for p in pieces if _WORD.search(p))
    return out


def reasoning_text(response: str) -> str:
    """The `<think>` contents of a response (all blocks, in order), or the whole text if it has none."""
    blocks = tag_blocks(response, "think")
    return "\n".join(blocks) if blocks else response


def split_steps(response: str, method: str = "regex") -> list[str]:
    """Reasoning steps of a response: its `<step>` contents if tagged, else its sentences.

    Only the `<think>` part counts when there is one (MOSS-ChatV aligns the reasoning, not the answer).
    """
    body = reasoning_text(response)
    tagged = [s.strip() for s in tag_blocks(body, "step")]
    if tagged:
        return [s for s in tagged if _WORD.search(s)]
    return split_sentences(body, method)
