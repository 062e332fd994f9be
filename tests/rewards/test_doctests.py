"""Every docstring example in `videoseek.rewards` runs and gives what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import videoseek.rewards as rewards_pkg

MODULES = sorted(m.name for m in pkgutil.iter_modules(rewards_pkg.__path__, prefix="videoseek.rewards."))


def test_every_rewards_module_is_collected():
    # the package must keep its families as modules: a rename that empties this list would hide failures
    assert {"videoseek.rewards.accuracy", "videoseek.rewards.format", "videoseek.rewards.compose"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctest examples failed"
