"""ROUGE equal to the rouge-score package (F-measures, Porter stemming), pairwise and as a matrix."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer, tokenize
from nltk.stem import porter

from videoseek.rewards.rouge import RougeReference, lcs_length, rouge_avg, rouge_avg_matrix, rouge_features, rouge_scores, rouge_tokenize

SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
KEYS = ("rouge1", "rouge2", "rougeL")

# words chosen to exercise stemming (running/runs/ran), short tokens (<=3 chars are not stemmed),
# digits, punctuation inside and around words, non-ASCII letters and case folding that changes length
WORDS = [
    "the", "a", "cat", "cats", "running", "runs", "ran", "runner", "door", "doors", "opened", "opening", "generalization",
    "3.5", "00:01:02", "x2", "e.g.", "don't", "co-operate", "İstanbul", "café", "naïve", "中文", "ÉCOLE", "straße",
    ",", ".", "!!", "...", "—", "(", ")", "\n", "\t", "caresses", "ponies", "sky", "skies", "agreed", "feed",
]


def random_text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.05:
        return ""
    if kind < 0.1:
        return "".join(rng.choice(",.!?;:()-—…") for _ in range(rng.randint(1, 8)))  # punctuation only
    if kind < 0.2:
        return " ".join([rng.choice(WORDS)] * rng.randint(1, 12))  # one repeated word
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))


def reference_scores(candidate: str, reference: str) -> dict:
    s = SCORER.score(reference, candidate)
    return {k: s[k].fmeasure for k in KEYS}


def test_tokenizer_equals_rouge_score_tokenizer():
    stemmer = porter.PorterStemmer()
    rng = random.Random(1)
    for _ in range(500):
        text = random_text(rng)
        assert rouge_tokenize(text) == tokenize.tokenize(text, stemmer), text


def test_rouge_scores_equal_rouge_score_on_thousands_of_pairs():
    rng = random.Random(0)
    for _ in range(3000):
        a, b = random_text(rng), random_text(rng)
        assert rouge_scores(a, b) == reference_scores(a, b), (a, b)  # exact, not approximate


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80))
def test_rouge_scores_equal_rouge_score_on_arbitrary_unicode(a, b):
    assert rouge_scores(a, b) == reference_scores(a, b)


@pytest.mark.parametrize("a,b", [("", ""), ("", "cat"), ("...", "!!!"), ("cat cat cat", "cat"), ("the the the", "the the"), ("中文 文本", "中文"), ("a b c", "a b c")])
def test_edge_pairs(a, b):
    assert rouge_scores(a, b) == reference_scores(a, b)


def test_matrix_equals_pairwise_bit_for_bit():
    rng = random.Random(2)
    for _ in range(40):
        refs = [random_text(rng) for _ in range(rng.randint(1, 9))]
        cands = [random_text(rng) for _ in range(rng.randint(1, 21))]
        mat = rouge_avg_matrix([rouge_features(r) for r in refs], [rouge_features(c) for c in cands])
        expected = np.array([[rouge_avg(c, r) for c in cands] for r in refs])
        assert mat.shape == (len(refs), len(cands))
        assert np.array_equal(mat, expected)
        for i, r in enumerate(refs):  # and equal to the package
            for j, c in enumerate(cands):
                s = reference_scores(c, r)
                assert mat[i, j] == (s["rouge1"] + s["rouge2"] + s["rougeL"]) / 3


def test_matrix_handles_references_longer_than_63_tokens():
    rng = random.Random(3)
    refs = [" ".join(rng.choice(WORDS[:13]) for _ in range(n)) for n in (62, 63, 64, 150)]
    cands = [" ".join(rng.choice(WORDS[:13]) for _ in range(n)) for n in (0, 5, 70, 200)]
    prepared = RougeReference([rouge_features(r) for r in refs])
    mat = prepared.avg_matrix([rouge_features(c) for c in cands])
    assert np.array_equal(mat, np.array([[rouge_avg(c, r) for c in cands] for r in refs]))
    again = prepared.avg_matrix([rouge_features(c) for c in cands])  # a prepared reference is reusable
    assert np.array_equal(mat, again)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=70), st.lists(st.sampled_from("abcde"), max_size=70))
def test_bit_parallel_lcs_equals_dynamic_programming(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(table[i - 1][j], table[i][j - 1])
    assert lcs_length(a, b) == table[-1][-1]
