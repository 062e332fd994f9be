"""Rewrite the generated blocks of the README and the docs from the code (`make docs`).

A generated block is the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in a markdown
file; everything outside the markers is written by hand. Blocks (`BLOCKS`):

- `presets`: the reward preset table, `videoseek.rewards.preset_table()` (from `PRESETS` and the
  registered components), in README.md, docs/training.md and docs/rewards.md.

    python docs/make_docs.py            # rewrite the blocks in place
    python docs/make_docs.py --check    # exit 1 naming each file whose blocks are stale

`tests/rewards/test_preset_tables.py` runs the check, so a preset or component change that leaves
a checked-in table behind fails the tests.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from videoseek.rewards import preset_table

ROOT = Path(__file__).resolve().parent.parent
BLOCKS: dict[str, Callable[[], str]] = {"presets": preset_table}
FILES = {"presets": ["README.md", "docs/training.md", "docs/rewards.md"]}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {name}:begin -->\n).*?(\n<!-- {name}:end -->)", re.DOTALL)


def rewrite(text: str) -> str:
    """`text` with each generated block it holds replaced by what the code generates now."""
    for name, generate in BLOCKS.items():
        body = generate()
        text = _block(name).sub(lambda m: m.group(1) + body + m.group(2), text)
    return text


def stale_files(root: Path = ROOT) -> list[str]:
    """The files whose generated blocks differ from the code, or that lack the markers they should hold."""
    out = []
    for name, files in FILES.items():
        for rel in files:
            text = (root / rel).read_text(encoding="utf-8")
            if not _block(name).search(text):
                out.append(f"{rel}: no <!-- {name}:begin --> / <!-- {name}:end --> block")
            elif rewrite(text) != text:
                out.append(f"{rel}: the {name} block differs from the code (run `make docs`)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for line in stale:
            print(line, file=sys.stderr)
        return 1 if stale else 0
    for rel in sorted({f for files in FILES.values() for f in files}):
        path = ROOT / rel
        text = path.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
