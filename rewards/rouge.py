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
from functools import lru_cache
from itertools import repeat

import numpy as np
from nltk.stem.porter import PorterStemmer

_NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
_VALID_TOKEN = re.compile(r"^[a-z0-9]+$")
# The same substitution for ASCII text as a translation table (about 3x faster than the regex).
_ASCII_TO_SPACE = str.maketrans({chr(c): " " for c in range(128) if not (chr(c).isdigit() or "a" <= chr(c) <= "z")})
_STEMMER = PorterStemmer()  # NLTK_EXTENSIONS mode, the one rouge-score instantiates

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """Final token of one lower-case [a-z0-9] word: Porter stem if longer than 3 characters, ""
    when that fails rouge-score's validity check (memoised: the stemmer is pure and costs ~10 µs
    a call; the cache is bounded and never changes a result)."""
    if len(word) <= 3:
        return word
    stem = _STEMMER.stem(word)
    return stem if _VALID_TOKEN.match(stem) else ""


def rouge_tokenize(text: str) -> list[str]:
    """Tokens exactly as `rouge_score.tokenize.tokenize(text, PorterStemmer())` returns them.

    After the substitution only [a-z0-9] runs and single spaces are left, so `str.split` equals
    rouge-score's `\\s+` split and every non-empty short token is already valid.

    >>> rouge_tokenize("Running dogs, 3.5 km!")
    ['run', 'dog', '3', '5', 'km']
    """
    low = text.lower()
    words = low.translate(_ASCII_TO_SPACE).split() if low.isascii() else _NON_ALPHANUM.sub(" ", low).split()
    return list(filter(None, map(_stem, words)))


class RougeFeatures:
    """What ROUGE needs from one text, computed once: its tokens (n-gram counts on demand)."""

    __slots__ = ("tokens", "_unigrams", "_bigrams")

    def __init__(self, tokens: Sequence[str]):
        self.tokens = tuple(tokens)
        self._unigrams: Counter | None = None
        self._bigrams: Counter | None = None

    @property
    def unigrams(self) -> Counter:
        if self._unigrams is None:
            self._unigrams = Counter(self.tokens)
        return self._unigrams

    @property
    def bigrams(self) -> Counter:
        if self._bigrams is None:
            self._bigrams = Counter(zip(self.tokens, self.tokens[1:]))
        return self._bigrams

    def __repr__(self) -> str:
        return f"RougeFeatures({list(self.tokens)!r})"


def rouge_features(text: str) -> RougeFeatures:
    """Tokenize `text` once for any number of ROUGE comparisons."""
    return RougeFeatures(rouge_tokenize(text))


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


_POPCOUNT_TABLE = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


def _popcount64(values: np.ndarray) -> np.ndarray:
    """Set bits of each uint64 (numpy >= 2 has `bitwise_count`; the byte table serves older numpy)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values).astype(np.int64)
    return _POPCOUNT_TABLE[values.view(np.uint8).reshape(*values.shape, 8)].sum(axis=-1)


def _f_matrix(overlap: np.ndarray, ref_total: np.ndarray, cand_total: np.ndarray) -> np.ndarray:
    """F-measures from overlaps with rouge-score's float operations, in its order.

    `ref_total` (rows) and `cand_total` (columns) are the denominators, already guarded as
    rouge-score guards them (`max(count, 1)`).
    """
    precision = overlap / cand_total[None, :]
    recall = overlap / ref_total[:, None]
    total = precision + recall
    with np.errstate(invalid="ignore", divide="ignore"):
        f = 2 * precision * recall / total
    return np.where(total > 0, f, 0.0)


def _row_counts(rows: np.ndarray, ids: np.ndarray, n_rows: int, size: int) -> np.ndarray:
    """(n_rows, size) counts of `ids` per row; ids equal to `size` (no match) are dropped."""
    flat = np.bincount(rows * (size + 1) + ids, minlength=n_rows * (size + 1))
    return flat.reshape(n_rows, size + 1)[:, :size]


class RougeReference:
    """Reference texts prepared once for ROUGE_avg against many candidates (PRR's reference steps).

    Only tokens and bigrams that occur in a reference can overlap, so the vocabulary, the
    reference count matrices and the LCS match masks are built from the references alone, once;
    each candidate batch then maps its tokens through that vocabulary (unknown ones never match).
    Scores equal `rouge_avg` on every pair, bit for bit.
    """

    def __init__(self, references: Sequence[RougeFeatures]):
        self.features = tuple(references)
        self.n = n = len(self.features)
        vocab: dict[str, int] = {}
        self.ids = [np.array([vocab.setdefault(t, len(vocab)) for t in f.tokens], dtype=np.int64) for f in self.features]
        self.vocab, self.size = vocab, len(vocab)
        size = self.size
        self.lengths = np.array([len(ids) for ids in self.ids], dtype=np.int64)
        rows = np.repeat(np.arange(n), self.lengths)
        flat = np.concatenate(self.ids) if n else np.zeros(0, dtype=np.int64)
        self.uni = _row_counts(rows, flat, n, size)
        self.uni_total = np.maximum(self.lengths, 1)
        # bigrams: code (a, b) as a*(size+1)+b; the reference's distinct codes are its bigram vocabulary
        codes = [ids[:-1] * (size + 1) + ids[1:] for ids in self.ids]
        self.bigram_codes = np.unique(np.concatenate(codes)) if n else np.zeros(0, dtype=np.int64)
        nb = len(self.bigram_codes)
        code_rows = np.repeat(np.arange(n), [len(c) for c in codes])
        code_ids = np.searchsorted(self.bigram_codes, np.concatenate(codes)) if n else np.zeros(0, dtype=np.int64)
        self.bi = _row_counts(code_rows, code_ids, n, nb)
        self.bi_total = np.maximum(self.lengths - 1, 1)
        # LCS match masks: bit p of masks[i, v] is set when token p of reference i is v
        self.short = self.lengths <= 63
        self.masks = np.zeros((n, size + 1), dtype=np.uint64)  # column `size`: unknown token, no match
        for i, ids in enumerate(self.ids):
            if self.short[i] and len(ids):
                np.bitwise_or.at(self.masks[i], ids, np.left_shift(np.uint64(1), np.arange(len(ids), dtype=np.uint64)))
        self.full_bits = np.array([(1 << int(k)) - 1 if k <= 63 else 0 for k in self.lengths], dtype=np.uint64)

    def _bigram_ids(self, flat: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, reference-bigram id) of every candidate bigram; unknown bigrams get id nb.

        `flat` holds all candidates' token ids back to back, `rows` the candidate of each;
        a bigram is two neighbours of the same candidate.
        """
        nb = len(self.bigram_codes)
        same = rows[:-1] == rows[1:]
        codes = (flat[:-1] * (self.size + 1) + flat[1:])[same]
        brows = rows[:-1][same]
        if nb == 0:
            return brows, np.full(len(codes), nb, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.bigram_codes, codes), nb - 1)
        return brows, np.where(self.bigram_codes[pos] == codes, pos, nb)

    def _lcs(self, flat: np.ndarray, rows: np.ndarray, cand_len: np.ndarray, candidates: Sequence[RougeFeatures]) -> np.ndarray:
        """LCS lengths of every (reference, candidate) pair at once.

        Hyyrö's bit-parallel update with the bit vectors of all pairs packed side by side into
        one Python integer: 64 bits per pair and references of at most 63 tokens, so a carry
        never crosses into the next pair (V + U < 2^64) and V − U never borrows (U ⊆ V). One pass
        over the candidates' token positions updates every pair. Longer references use `lcs_length`.

        Candidates are packed in classes of similar length (lengths in [2^(c-1), 2^c)): one pass
        costs (longest candidate) × (pairs), so one long step among many short ones made a single
        pass quadratic in the text's length; per class the padding at most doubles the work.
        """
        n, m = self.n, len(cand_len)
        lcs = np.zeros((n, m), dtype=np.int64)
        starts = np.cumsum(cand_len) - cand_len
        classes = np.frexp(cand_len.astype(np.float64))[1]  # bit length of each length (0 for 0)
        for c in np.unique(classes):
            cols = np.flatnonzero(classes == c)
            lengths = cand_len[cols]
            if c == 0 or not len(cols):
                continue  # empty candidates: LCS 0
            total = int(lengths.sum())
            block_rows = np.repeat(np.arange(len(cols)), lengths)
            offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
            padded = np.full((len(cols), int(lengths.max())), self.size, dtype=np.int64)
            padded[block_rows, offsets] = flat[np.repeat(starts[cols], lengths) + offsets]
            lcs[:, cols] = self._lcs_packed(padded)
        for i in np.flatnonzero(~self.short):
            ref = self.features[i].tokens
            lcs[i] = [lcs_length(ref, f.tokens) for f in candidates]
        return lcs

    def _lcs_packed(self, padded: np.ndarray) -> np.ndarray:
        """LCS lengths against the short references of candidates given as padded token ids (m, width)."""
        n, (m, width) = self.n, padded.shape
        by_position = np.ascontiguousarray(self.masks[:, padded].transpose(2, 0, 1))  # (width, n, m)
        buffer, stride = memoryview(by_position.reshape(-1).view(np.uint8)), n * m * 8
        full = int.from_bytes(np.repeat(self.full_bits[:, None], m, axis=1).tobytes(), "little")
        v = full
        for start in range(0, width * stride, stride):
            u = v & int.from_bytes(buffer[start : start + stride], "little")
            v = ((v + u) | (v - u)) & full
        packed = np.frombuffer(v.to_bytes(stride, "little"), dtype=np.uint64).reshape(n, m)
        return self.lengths[:, None] - _popcount64(packed)

    def avg_matrix(self, candidates: Sequence[RougeFeatures]) -> np.ndarray:
        """ROUGE_avg (MOSS-ChatV eq. 8) with these references as rows and `candidates` as columns."""
        n, m = self.n, len(candidates)
        if n == 0 or m == 0:
            return np.zeros((n, m))
        tokens = [t for f in candidates for t in f.tokens]
        flat = np.fromiter(map(self.vocab.get, tokens, repeat(self.size, len(tokens))), dtype=np.int64, count=len(tokens))
        cand_len = np.array([len(f.tokens) for f in candidates], dtype=np.int64)
        rows = np.repeat(np.arange(m), cand_len)
        cand_uni = _row_counts(rows, flat, m, self.size)
        r1 = _f_matrix(np.minimum(self.uni[:, None, :], cand_uni[None, :, :]).sum(axis=2), self.uni_total, np.maximum(cand_len, 1))
        brows, bids = self._bigram_ids(flat, rows)
        cand_bi = _row_counts(brows, bids, m, len(self.bigram_codes))
        r2 = _f_matrix(np.minimum(self.bi[:, None, :], cand_bi[None, :, :]).sum(axis=2), self.bi_total, np.maximum(cand_len - 1, 1))
        lcs = self._lcs(flat, rows, cand_len, candidates)
        rl = _f_matrix(lcs, self.uni_total, np.maximum(cand_len, 1))
        rl = np.where((self.lengths[:, None] > 0) & (cand_len[None, :] > 0), rl, 0.0)
        return (r1 + r2 + rl) / 3


def rouge_avg_matrix(references: Sequence[RougeFeatures] | RougeReference, candidates: Sequence[RougeFeatures]) -> np.ndarray:
    """Matrix of ROUGE_avg (eq. 8) with references as rows and candidates as columns.

    `references` may be a `RougeReference` prepared once and reused. Bit-identical to calling
    `rouge_avg` on every pair: overlaps and LCS lengths are exact integers and the float
    operations are the same, in the same order.

    >>> refs = [rouge_features("the man opens the door")]
    >>> cands = [rouge_features("a man opens a door"), rouge_features("nothing here")]
    >>> rouge_avg_matrix(refs, cands).round(4).tolist()
    [[0.4833, 0.0]]
    """
    prepared = references if isinstance(references, RougeReference) else RougeReference(references)
    return prepared.avg_matrix(candidates)
