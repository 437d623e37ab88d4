"""Loading taskqueue's pytest plugin when the installed metadata predates its entry point.

``pip install -e .`` registers the plugin (``pytest11: taskqueue``) and pytest
loads it by itself; a checkout run against an older install must load it by
module name instead. Loading it both ways would register it twice, which
pytest refuses, hence the check.
"""

from __future__ import annotations

from importlib.metadata import entry_points

PLUGIN = "taskqueue.testing.plugin"


def registered_by_entry_point() -> bool:
    return any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))


def plugin_args() -> list[str]:
    """Arguments that make a pytester run load the plugin as an installed one would."""
    return [] if registered_by_entry_point() else ["-p", PLUGIN]
