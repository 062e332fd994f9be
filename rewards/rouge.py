"""ROUGE-1, ROUGE-2 and ROUGE-L F-measures, equal to the `rouge-score` package with stemming.

Used by the free-form accuracy reward (Video-R1: mean of ROUGE-1/2/L F) and by the Process
Reasoning Reward of MOSS-ChatV (seed 000, eq. 8: ROUGE_avg = (R1 + R2 + RL) / 3).

Why not call `rouge-score` itself: it re-tokenizes and re-stems both texts for every pair and
fills an O(n·m) Python LCS table; a 20×8 PRR cost matrix then takes about 0.2 s. Here a text is
tokenized once into `RougeFeatures` (tokens, n-gram counts), Porter stems are memoised per word
(a bounded cache: results never depend on it), the n-gram overlaps of a whole matrix are one
numpy reduction, and the LCS length is the bit-parallel algorithm of Hyyrö (2004), O(n·⌈m/w⌉).
The tokenizer reproduces `rouge_score.tokenize.tokenize` exactly (lower-case, non-[a-z0-9] to
space, Porter stem of tokens longer than 3 characters, nltk's NLTK_EXTENSIONS mode), and every
score is computed with the same floating-point operations in the same order, so values are
bit-identical (tests check thousands of pairs against the package).

>>> s = rouge_scores("the cat sat on the mat", "the cat is on the mat")
>>> round(s["rouge1"], 4), round(s["rouge2"], 4), round(s["rougeL"], 4)
(0.8333, 0.6, 0.8333)
>>> rouge_scores("", "anything")["rougeL"]
0.0
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from nltk.stem.porter import PorterStemmer

_NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
_SPACES = re.compile(r"\s+")
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
_STEMMER = PorterStemmer()  # NLTK_EXTENSIONS mode, the one rouge-score instantiates

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """Porter stem of one lower-case token (memoised: the stemmer is pure and ~10 µs a call)."""
    return _STEMMER.stem(word)


def rouge_tokenize(text: str) -> list[str]:
    """Tokens exactly as `rouge_score.tokenize.tokenize(text, PorterStemmer())` returns them.

    >>> rouge_tokenize("Running dogs, 3.5 km!")
    ['run', 'dog', '3', '5', 'km']
    """
    tokens = _SPACES.split(_NON_ALPHANUM.sub(" ", text.lower()))
    tokens = [_stem(t) if len(t) > 3 else t for t in tokens]
    return [t for t in tokens if _VALID_TOKEN.match(t)]


@dataclass(frozen=True)
class RougeFeatures:
    """What ROUGE needs from one text, computed once: tokens and their uni- and bi-gram counts."""

    tokens: tuple[str, ...]
    unigrams: Counter
    bigrams: Counter


def rouge_features(text: str) -> RougeFeatures:
    """Tokenize `text` once for any number of ROUGE comparisons."""
    tokens = tuple(rouge_tokenize(text))
    return RougeFeatures(tokens, Counter(tokens), Counter(zip(tokens, tokens[1:])))


def _fmeasure(precision: float, recall: float) -> float:
    """Same expression as `rouge_score.scoring.fmeasure` (same rounding)."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _ngram_f(target: Counter, prediction: Counter) -> float:
    """ROUGE-N F-measure from n-gram counts, as `rouge_scorer._score_ngrams`."""
    overlap = sum(min(c, prediction[g]) for g, c in target.items()) if prediction else 0
    precision = overlap / max(sum(prediction.values()), 1)
    recall = overlap / max(sum(target.values()), 1)
    return _fmeasure(precision, recall)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Hyyrö 2004).

    One machine-word-style update per token of `b` on a bitmask over `a` (Python ints are
    arbitrary precision, so any length works); equal to the O(n·m) table of rouge-score.

    >>> lcs_length("ABCBDAB", "BDCABA")
    4
    """
    if not a or not b:
        return 0
    match: dict[str, int] = {}
    for i, tok in enumerate(a):
        match[tok] = match.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        m = match.get(tok)
        if m is not None:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _lcs_f(target: Sequence[str], prediction: Sequence[str]) -> float:
    """ROUGE-L F-measure, as `rouge_scorer._score_lcs`."""
    if not target or not prediction:
        return 0.0
    lcs = lcs_length(target, prediction)
    return _fmeasure(lcs / len(prediction), lcs / len(target))


def rouge_scores(candidate: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L F-measures of `candidate` against `reference` (Porter stemming).

    Equal to `RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(reference,
    candidate)[k].fmeasure`. F is symmetric, so the argument order only matters for P and R.
    """
    return rouge_scores_features(rouge_features(candidate), rouge_features(reference))


def rouge_scores_features(candidate: RougeFeatures, reference: RougeFeatures) -> dict[str, float]:
    """`rouge_scores` on pre-computed features."""
    return {
        "rouge1": _ngram_f(reference.unigrams, candidate.unigrams),
        "rouge2": _ngram_f(reference.bigrams, candidate.bigrams),
        "rougeL": _lcs_f(reference.tokens, candidate.tokens),
    }


def rouge_avg(candidate: str, reference: str) -> float:
    """Mean of the ROUGE-1, ROUGE-2 and ROUGE-L F-measures (MOSS-ChatV eq. 8; Video-R1 free form).

    >>> rouge_avg("a red ball", "a red ball")
    1.0
    """
    s = rouge_scores(candidate, reference)
    return (s["rouge1"] + s["rouge2"] + s["rougeL"]) / 3


def _count_matrix(features: Sequence[Counter], vocab: dict) -> np.ndarray:
    """Rows: texts; columns: n-grams of `vocab`; entries: counts."""
    mat = np.zeros((len(features), len(vocab)), dtype=np.int64)
    for row, counts in enumerate(features):
        for gram, c in counts.items():
            mat[row, vocab[gram]] = c
    return mat


def _ngram_f_matrix(rows: Sequence[Counter], cols: Sequence[Counter]) -> np.ndarray:
    """ROUGE-N F for every (row, col) pair; rows play the reference, cols the candidate.

    Overlaps are exact integer sums of element-wise minima; the float ops mirror `_ngram_f`.
    """
    vocab: dict = {}
    for counts in (*rows, *cols):
        for gram in counts:
            vocab.setdefault(gram, len(vocab))
    r, c = _count_matrix(rows, vocab), _count_matrix(cols, vocab)
    overlap = np.minimum(r[:, None, :], c[None, :, :]).sum(axis=2)
    precision = overlap / np.maximum(c.sum(axis=1), 1)[None, :]
    recall = overlap / np.maximum(r.sum(axis=1), 1)[:, None]
    total = precision + recall
    with np.errstate(invalid="ignore", divide="ignore"):
        f = 2 * precision * recall / total
    return np.where(total > 0, f, 0.0)


def rouge_avg_matrix(references: Sequence[RougeFeatures], candidates: Sequence[RougeFeatures]) -> np.ndarray:
    """Matrix of ROUGE_avg (eq. 8) with references as rows and candidates as columns.

    Bit-identical to calling `rouge_avg` on every pair (the sum is taken in the same order).

    >>> refs = [rouge_features("the man opens the door")]
    >>> cands = [rouge_features("a man opens a door"), rouge_features("nothing here")]
    >>> rouge_avg_matrix(refs, cands).round(4).tolist()
    [[0.4833, 0.0]]
    """
    n, m = len(references), len(candidates)
    if n == 0 or m == 0:
        return np.zeros((n, m))
    r1 = _ngram_f_matrix([f.unigrams for f in references], [f.unigrams for f in candidates])
    r2 = _ngram_f_matrix([f.bigrams for f in references], [f.bigrams for f in candidates])
    rl = np.array([[_lcs_f(ref.tokens, cand.tokens) for cand in candidates] for ref in references])
    return (r1 + r2 + rl) / 3
