"""The app's worker, with steadyloop added: the three lines that name steadyloop are all
it took (`scripts/adoption_lines.py` counts them). Run it beside a Temporal server
(`temporal server start-dev`) with a model endpoint configured as for `steadyloop
worker` (OPENAI_BASE_URL and OPENAI_API_KEY, or STEADYLOOP_ENDPOINTS)."""

from __future__ import annotations

import asyncio
import os

from temporalio.client import Client
from temporalio.worker import Worker

from examples.orders.payments import charge_card
from examples.orders.workflows import OrderWorkflow
from steadyloop.plugin import SteadyloopPlugin
from steadyloop.tools import activity_as_tool

TASK_QUEUE = "orders"


async def main() -> None:
    client = await Client.connect(
        os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"),
        plugins=[SteadyloopPlugin(tools=[activity_as_tool(charge_card, approval=True)])],
    )
    worker = Worker(
        client, task_queue=TASK_QUEUE, workflows=[OrderWorkflow], activities=[charge_card]
    )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
