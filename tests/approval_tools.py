"""A tool registry for the command-line tests of approvals: `--tools approval_tools:TOOLS`
(the tests put this directory on the worker's PYTHONPATH)."""

from __future__ import annotations

import os
from pathlib import Path

from steadyloop.tools import ToolRegistry, tool

WIRES_ENV = "STEADYLOOP_TEST_WIRES"


@tool(effect="opaque", approval=True)
async def wire(amount: float, to: str) -> str:
    """Wire money: a person approves every call first."""
    with Path(os.environ[WIRES_ENV]).open("a", encoding="utf-8") as wires:
        wires.write(f"{amount:g} to {to}\n")
    return f"wired {amount:g} to {to}"


TOOLS = ToolRegistry([wire])
