"""`connect`: one call to a client that starts, follows and steers runs.

The client must read and write payloads exactly as the worker does: pydantic models,
and payloads over the blob threshold kept in the worker's blob directory (a result or a
continued run's input is only a reference in history). So `connect` reads the settings
the worker reads, by the same rule (flags, then environment, then the config file:
`steadyloop._worker.config`): the Temporal address, namespace and task queue, TLS and API
key through Temporal's own environment configuration (`TEMPORAL_API_KEY`,
`TEMPORAL_TLS*`, `TEMPORAL_PROFILE`), and `STEADYLOOP_BLOB_DIR` (a directory or
`s3://bucket/prefix`, the config file's `blob_dir` otherwise) / `STEADYLOOP_BLOB_THRESHOLD`.
Nobody builds `steadyloop_data_converter` by hand; a `Replayer` takes
`TemporalSettings.data_converter` from the same settings.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client

from steadyloop._worker.config import DEFAULT_TASK_QUEUE, load_config, temporal_settings
from steadyloop._worker.serving import ServedTools
from steadyloop.client._fanout import DEFAULT_BUFFER, EventFanout
from steadyloop.client._runs import DEFAULT_WORKER_BOUND, RunHandle
from steadyloop.client._threads import Thread, check_id

__all__ = ["SteadyloopClient", "connect"]


class SteadyloopClient:
    """Threads and runs on one Temporal namespace and task queue.

    Built by `connect`; or from a Temporal `Client` you connected yourself, which must
    use steadyloop's data converter (`TemporalSettings.data_converter`) or results kept
    in the blob directory cannot be read.
    """

    def __init__(
        self,
        temporal: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        worker_bound: timedelta = DEFAULT_WORKER_BOUND,
        fanout_buffer: int = DEFAULT_BUFFER,
    ) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        # How long a query or update waits for a worker before `NoWorkerAnswered`.
        self.worker_bound = worker_bound
        # Followers of one run through this client (a web server's clients among them)
        # share one reader of its event log, which keeps `fanout_buffer` events for them.
        self.fanout = EventFanout(buffer=fanout_buffer)
        # What the task queue's worker serves: asked at this client's first start, so a
        # run naming a tool it lacks is refused before it starts (`Thread.start`).
        self.served = ServedTools(temporal, task_queue)

    def thread(self, thread_id: str | None = None) -> Thread:
        """The thread named `thread_id`, or a new one with a minted id (`thread.id`).
        Nothing is started until `thread.start`."""
        chosen = thread_id if thread_id is not None else f"thread-{uuid.uuid4().hex}"
        return Thread(
            self.temporal,
            chosen,
            task_queue=self.task_queue,
            worker_bound=self.worker_bound,
            fanout=self.fanout,
            served=self.served,
        )

    def run(self, workflow_id: str) -> RunHandle:
        """A handle on any steadyloop run by its workflow id (a thread's `thread/n`, or a
        run `steadyloop run` started)."""
        check_id(workflow_id, "a workflow id", max_chars=1000)
        return RunHandle(
            self.temporal, workflow_id, worker_bound=self.worker_bound, fanout=self.fanout
        )


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    task_queue: str | None = None,
    config: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    worker_bound: timedelta = DEFAULT_WORKER_BOUND,
) -> SteadyloopClient:
    """Connect as the worker's settings say; arguments given here win over them.

    `config`: a steadyloop config file (default `STEADYLOOP_CONFIG`); `environ`: the
    environment to read (default `os.environ`). Raises `ConfigError` for an unusable
    setting and `TemporalUnreachable` when nothing answers at the address.
    """
    env = os.environ if environ is None else environ
    settings = temporal_settings(
        address=address,
        namespace=namespace,
        task_queue=task_queue,
        config=load_config(config, env),
        environ=env,
    )
    return SteadyloopClient(
        await settings.connect(), task_queue=settings.task_queue, worker_bound=worker_bound
    )
