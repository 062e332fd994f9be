"""Loading a user's class from an import path: "package.module:Class" or "path/to/file.py:Class".

The registries of tools (`videoseek.envs.tools.get_tool`) and of reward components
(`videoseek.rewards.registry.get_component`) take such paths, so a class written in one file is
found by name in any process that reads the config (verl's Ray workers, TRL, the viewer) without
a registration step of its own. It lives here, in the lowest package, so both can use it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any


def import_module_path(module: str) -> ModuleType:
    """The module of an import path: a dotted name, or a file `path/to/module.py`.

    A file is loaded once under a name made from its absolute path. A dotted name is looked up as
    `python -m` would: on sys.path, then in the current directory (a console script such as
    `videoseek` does not put it on sys.path, `python -m` does).
    """
    if module.endswith(".py"):
        path = os.path.abspath(module)
        name = "videoseek_user_" + hashlib.blake2b(path.encode(), digest_size=6).hexdigest()
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None or not os.path.isfile(path):
            raise ImportError(f"no such file {path}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return mod
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        if not exc.name or not module.startswith(exc.name) or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        return importlib.import_module(module)


def import_subclass(spec: str, base: type, what: str) -> type:
    """The class an import path names, which must subclass `base`; ValueError naming the spec otherwise."""
    cls = import_object(spec, what)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"{what} {spec!r} is not a videoseek {base.__name__} subclass")
    return cls


def same_class(held: type, cls: type) -> bool:
    """Is `cls` the registered class `held`, or the same class from the same file imported a second
    time (a module run as a script and imported, or loaded by path)? Registering it again is a no-op."""
    return held is cls or (held.__qualname__ == cls.__qualname__ and _source(held) == _source(cls))


def _source(cls: type) -> str | None:
    return getattr(sys.modules.get(cls.__module__), "__file__", None)


def import_object(spec: str, what: str) -> Any:
    """The object named by "package.module:Name" or "path/to/file.py:Name".

    Raises ValueError naming the spec (and `what` was looked for) when it cannot be imported.
    """
    module, _, attr = spec.rpartition(":")
    try:
        return getattr(import_module_path(module), attr)
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise ValueError(f"{what} {spec!r} cannot be imported ({type(exc).__name__}: {exc})") from None
