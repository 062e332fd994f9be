"""The preset tables of the README and the docs, and the `--reward` help, are generated from `PRESETS`
(issue 36, item 5): a checked-in table that differs from the code fails here (`make docs` rewrites it)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from videoseek.rewards import PRESETS, REWARD_COMPONENTS, preset_table
from videoseek.rewards.presets import preset_help

ROOT = Path(__file__).resolve().parents[2]


def make_docs():
    spec = importlib.util.spec_from_file_location("make_docs", ROOT / "docs" / "make_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_checked_in_tables_are_the_generated_ones():
    docs = make_docs()
    assert docs.stale_files() == []
    for rel in docs.FILES["presets"]:
        text = (ROOT / rel).read_text(encoding="utf-8")
        assert preset_table() in text, rel


def test_a_stale_or_missing_table_is_found(tmp_path):
    docs = make_docs()
    (tmp_path / "docs").mkdir()
    table = preset_table()
    (tmp_path / "README.md").write_text(f"intro\n<!-- presets:begin -->\n{table}\n<!-- presets:end -->\nrest\n", encoding="utf-8")
    (tmp_path / "docs" / "training.md").write_text("<!-- presets:begin -->\n| preset |\n<!-- presets:end -->\n", encoding="utf-8")
    (tmp_path / "docs" / "rewards.md").write_text("no markers\n", encoding="utf-8")
    stale = docs.stale_files(tmp_path)
    assert [line.split(":")[0] for line in stale] == ["docs/training.md", "docs/rewards.md"]
    fixed = docs.rewrite((tmp_path / "docs" / "training.md").read_text(encoding="utf-8"))
    assert fixed == f"<!-- presets:begin -->\n{table}\n<!-- presets:end -->\n"


def test_the_table_has_every_preset_with_its_weights_and_needs():
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)`.*$", preset_table(), re.M)}
    assert list(rows) == list(PRESETS)  # default and sfgrpo too
    for name, weights in PRESETS.items():
        for component, weight in weights.items():
            assert (f"{component} {weight:g}" if weight else component) in rows[name]
    assert "a masked group" in rows["dmgrpo"] and "ref_delta_format ≥ 0.4" in rows["dmgrpo"]
    assert "continuations of each step prefix" in rows["processthinker"]
    assert all(REWARD_COMPONENTS[c].summary for weights in PRESETS.values() for c in weights)  # every cell has words


def test_reward_help_lists_every_preset(capsys):
    import argparse

    from videoseek.agents import rollout_cli

    parser = argparse.ArgumentParser()
    rollout_cli.add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert preset_help() in text and all(f"{name} (" in text for name in PRESETS)
    spec = importlib.util.spec_from_file_location("run_csgrpo", ROOT / "training" / "run_csgrpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.parse_args(["--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert preset_help() in text
