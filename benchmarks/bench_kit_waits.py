"""What one approval wait of the test kit costs in Temporal requests, before and after
it followed the run's event log.

Runs in `AgentEnv` (the time-skipping test server). Each round starts two runs whose
tool takes `--tool-s` seconds of real time before the call that waits for approval, and
waits for that approval two ways, one after the other:

- poll (before, kept here only to compare): the kit's old wait, a `pending_approvals`
  query and a `describe` of the run every 20 ms until the call waits;
- log (after): `RunningAgent.approvals()`, which follows the run's event log (long-poll
  updates of its output host) and asks for the run's list once, when the log says the
  call waits.

Requests are counted by wrapping `WorkflowHandle`'s `query`, `describe`,
`execute_update` and `start_update` (what the kit and the client API call). It prints
the median per wait of each kind, and the ratio of all requests log / poll. Nothing
asserts a count.

    .venv/bin/python benchmarks/bench_kit_waits.py             # 5 rounds, a 1 s tool
    .venv/bin/python benchmarks/bench_kit_waits.py --quick     # 2 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from steadyloop._workflows.tool_loop import ToolLoopWorkflow
from steadyloop.testing import AgentEnv, ScriptedModel
from steadyloop.testing._agent_env import RunningAgent
from steadyloop.tools import ToolRegistry, tool

COUNTED = ("query", "describe", "execute_update", "start_update")
counts: Counter[str] = Counter()


def count_requests() -> None:
    """Count every call of the counted `WorkflowHandle` methods into `counts`."""
    for name in COUNTED:
        original = getattr(WorkflowHandle, name)

        def wrapped(
            self: Any, *args: Any, _original: Any = original, _name: str = name, **kwargs: Any
        ) -> Awaitable[Any]:
            counts[_name] += 1
            result: Awaitable[Any] = _original(self, *args, **kwargs)
            return result

        setattr(WorkflowHandle, name, wrapped)


def registry(tool_s: float) -> ToolRegistry:
    @tool(effect="pure")
    async def slow() -> str:
        """Take its time."""
        await asyncio.sleep(tool_s)
        return "ok"

    @tool(effect="opaque", approval=True)
    async def wire(to: str) -> str:
        """Wire money (a person approves each call)."""
        return f"wired to {to}"

    return ToolRegistry([slow, wire])


async def poll_wait(running: RunningAgent) -> None:
    """The kit's wait before it followed the log: a query and a describe per look."""
    while True:
        waiting = await running.handle.query(ToolLoopWorkflow.pending_approvals)
        if waiting:
            return
        described = await running.handle.describe()
        if described.status not in (None, WorkflowExecutionStatus.RUNNING):
            raise AssertionError("the run ended before its call waited")
        await asyncio.sleep(0.02)


async def log_wait(running: RunningAgent) -> None:
    await running.approvals()


async def one_wait(env: AgentEnv, wait: Callable[[RunningAgent], Awaitable[None]]) -> Counter[str]:
    model = ScriptedModel().calls("slow").calls("wire", to="ana").says("done")
    running = await env.start(model, "pay ana")
    counts.clear()
    await wait(running)
    spent = Counter(counts)
    await running.approve("wire")
    await running.result()
    return spent


async def main(rounds: int, tool_s: float) -> None:
    count_requests()
    spent: dict[str, list[Counter[str]]] = {"poll": [], "log": []}
    async with AgentEnv(registry(tool_s)) as env:
        for _ in range(rounds):
            spent["poll"].append(await one_wait(env, poll_wait))
            spent["log"].append(await one_wait(env, log_wait))
    print(f"requests per approval wait, a {tool_s:g} s tool first (median of {rounds} rounds)")
    print(f"{'wait':<6}" + "".join(f"{name:>16}" for name in (*COUNTED, "all")))
    totals: dict[str, float] = {}
    for label, rows in spent.items():
        medians = [statistics.median(row[name] for row in rows) for name in COUNTED]
        totals[label] = statistics.median(sum(row.values()) for row in rows)
        cells = [*medians, totals[label]]
        print(f"{label:<6}" + "".join(f"{cell:>16g}" for cell in cells))
    print(f"ratio all requests log / poll: {totals['log'] / totals['poll']:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tool-s", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    arguments = parser.parse_args()
    asyncio.run(main(2 if arguments.quick else arguments.rounds, arguments.tool_s))
