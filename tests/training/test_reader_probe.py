"""training/reader_probe.py: the linear probe of a checkpoint's vision features, on real decoded
crops of the flash_colour curriculum and the tiny models of each family."""

from __future__ import annotations

import json

import numpy as np
import pytest

from videoseek.envs.sample import write_jsonl
from videoseek.envs.synth import generate_dataset
from videoseek.training.reader_probe import centroid_pairs, crop_window, linear_probe, main


@pytest.fixture(scope="module")
def curriculum(tmp_path_factory):
    out = tmp_path_factory.mktemp("reader-probe")
    samples = generate_dataset(out, n=20, seed=5, kinds=["flash_colour"], min_duration=10, max_duration=10, avoid_uniform=(4,))
    return out / "samples.jsonl", samples


def test_the_probe_scores_what_the_features_hold():
    rng = np.random.default_rng(0)
    labels = [str(c) for c in rng.choice(list("ABCDE"), size=200)]
    centres = rng.normal(size=(5, 16)) * 3
    separable = np.stack([centres["ABCDE".index(a)] for a in labels]) + rng.normal(size=(200, 16))
    probe = linear_probe(separable, labels)
    assert probe["accuracy"] == 1.0 and probe["classes"] == list("ABCDE")
    assert np.trace(np.array(probe["confusion"])) == 200
    unrelated = linear_probe(rng.normal(size=(200, 16)), labels)  # nothing to learn: near chance (0.2)
    assert unrelated["accuracy"] < 0.4 and np.array(unrelated["confusion"]).sum() == 200
    pairs = centroid_pairs(separable, labels)
    assert len(pairs) == 10 and min(pairs.values()) > 0.95


def test_the_quarter_window_holds_the_clue_middle(curriculum):
    _, samples = curriculum
    for s in samples:
        (a, b), = s.clue_intervals
        start, end = crop_window(s, "quarter")
        assert end - start == pytest.approx(s.duration / 4) and start <= (a + b) / 2 <= end
        assert crop_window(s, "clue") == (a, b)


def test_the_frozen_tower_tells_the_colours_apart(curriculum, family_model_dir, single_thread_torch, tmp_path):
    family, model = family_model_dir
    data, samples = curriculum
    out = tmp_path / "probe.json"
    assert main(["--model", str(model), "--data", str(data), "--window", "clue", "--folds", "4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())["models"][str(model)]
    assert np.array(result["confusion"]).sum() == len(samples) == 20
    # every frame of a clue crop shows the large flash: a random tower's pooled features keep the colour
    assert min(result["centroid_pairs"].values()) >= 0.75, (family, result["centroid_pairs"])


def test_too_few_samples_are_refused(curriculum, tiny_model_dir, tmp_path):
    _, samples = curriculum
    few = tmp_path / "few.jsonl"
    write_jsonl(samples[:3], few)
    with pytest.raises(SystemExit, match="3 multiple-choice samples"):
        main(["--model", str(tiny_model_dir), "--data", str(few)])
