"""The runaway-argument guard's limits: a payload of an endpoint's configuration.

Its own module because both the turn's request (`completion`) and the guard that enforces
it (`runaway_guard`) need it, and the guard reads the turn's payloads: kept here, neither
imports the other in a circle.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["DEFAULT_MAX_ARGS_BYTES", "ArgumentLimits"]

DEFAULT_MAX_ARGS_BYTES = 24576


class ArgumentLimits(BaseModel):
    """The guard's limits and mode; each limit a positive integer or None (off)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_args_bytes: int | None = DEFAULT_MAX_ARGS_BYTES
    max_args_fragments: int | None = None
    max_total_args_bytes: int | None = None
    mode: Literal["enforce", "observe"] = "enforce"

    @field_validator("max_args_bytes", "max_args_fragments", "max_total_args_bytes", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        if value is True:
            raise ValueError("true is not a number; use a number, or false/null to turn it off")
        return None if value is False else value  # TOML has no null: `false` turns it off

    @field_validator("max_args_bytes", "max_args_fragments", "max_total_args_bytes")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value <= 0:
            raise ValueError(f"must be a positive integer, or null to turn it off; got {value!r}")
        return value

    @property
    def active(self) -> bool:
        return (
            self.max_args_bytes is not None
            or self.max_args_fragments is not None
            or self.max_total_args_bytes is not None
        )
