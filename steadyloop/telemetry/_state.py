"""The process's telemetry, once `install` has run; None (the default) means off.

Every emitting site asks `current()` first and does nothing else when it is None, so a
worker without telemetry pays one global read per model call and tool call, and never
imports OpenTelemetry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from steadyloop.telemetry._install import Installed

_installed: Installed | None = None


def current() -> Installed | None:
    return _installed


def set_current(installed: Installed | None) -> None:
    global _installed
    _installed = installed
