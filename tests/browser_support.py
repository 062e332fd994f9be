"""What the viewer's browser tests need: Debian's Chromium and the `playwright` package.

Without them the tests are skipped with the reason, except where `VIDEOSEEK_REQUIRE_BROWSER` is
set (`.ci/run` sets it after `make browser`): there a missing browser fails the run instead of
quietly skipping the tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]  # fmt: skip


def _missing(reason: str, module_level: bool = False):
    if os.environ.get("VIDEOSEEK_REQUIRE_BROWSER"):
        pytest.fail(f"{reason} (VIDEOSEEK_REQUIRE_BROWSER is set: the browser tests must run here)", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


def sync_api_or_skip(module_level: bool = False):
    """playwright.sync_api, after checking that Chromium is installed; skips (or fails, see above) otherwise."""
    if not CHROMIUM.exists():
        _missing(f"{CHROMIUM} not found: install Debian's chromium (make browser) to run the viewer's browser tests", module_level)
    try:
        from playwright import sync_api
    except ImportError:
        _missing("the playwright package is not installed (pip install playwright; no browser download needed)", module_level)
    return sync_api
