"""verl plugin: registers VideoSeek's agent loop and advantage estimator in every process.

verl 0.9.1 imports, at the end of `import verl`, every module named by an entry point of the
group `verl.plugins` (`verl/__init__.py`, policy `VERL_USE_EXTERNAL_PLUGINS`, default "auto").
The pyproject declares

    [project.entry-points."verl.plugins"]
    videoseek = "videoseek.training.verl_plugin.plugin"

so any Ray worker that imports verl (the trainer's TaskRunner, the agent-loop workers, the
reward workers) runs this module without a manual import. `VERL_USE_EXTERNAL_MODULES=
videoseek.training.verl_plugin.plugin` does the same where entry points are unavailable (e.g. the package is
not installed, only on `PYTHONPATH`).

verl swallows a failing plugin at DEBUG level, so each registration here logs a WARNING with the
reason instead; the agent loop is also named by `_target_` in the agent-loop YAML, whose import
errors verl raises loudly.
"""

from __future__ import annotations

import importlib
import logging

logger = logging.getLogger(__name__)

REGISTRATIONS = (
    "videoseek.training.verl_plugin.estimators",  # advantage estimator `videoseek_grpo`
    "videoseek.training.verl_plugin.agent_loop",  # agent loop `videoseek` (@register)
)


def load_registrations() -> dict[str, str | None]:
    """Import each registering module; returns module -> None on success or the error text."""
    status: dict[str, str | None] = {}
    for name in REGISTRATIONS:
        try:
            importlib.import_module(name)
            status[name] = None
        except Exception as exc:  # noqa: BLE001 - a plugin must never break `import verl`
            status[name] = f"{type(exc).__name__}: {exc}"
            logger.warning("videoseek verl plugin: could not import %s (%s)", name, status[name])
    return status


STATUS = load_registrations()
