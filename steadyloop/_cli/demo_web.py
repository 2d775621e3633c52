"""`steadyloop demo --web`: the scripted demo behind `steadyloop serve`, shown on the page.

Everything `steadyloop demo` starts (a dev server with its UI, a worker in this process,
the scripted provider, a throwaway sandbox and outbox), plus the HTTP server of
`steadyloop._web` on this machine only, with no token (as `serve --dev`). The demo's run
is started on the thread `demo` before the address is printed, so the page opens on it
streaming; a message sent from the page starts the thread's follow-up. It serves until
Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from steadyloop._cli.demo import DEMO_ENDPOINT, DEMO_MODEL, _environment, _workspace
from steadyloop._cli.demo_conversation import (
    DEMO_TOOLS,
    ORDER_PATH,
    ORDER_TEXT,
    PROMPT,
    SYSTEM_PROMPT,
    DemoProvider,
)
from steadyloop._history.payload_storage import steadyloop_data_converter
from steadyloop._routing.endpoints import EndpointRegistry
from steadyloop._run.models import RunLimits
from steadyloop._web.app import create_app
from steadyloop._web.client_backend import ClientBackend, RunDefaults, thread_tag
from steadyloop._web.settings import DEV_TENANT, web_settings
from steadyloop._worker.dev_server import dev_server
from steadyloop._worker.process import WorkerOptions, install_stop_signals, running_worker
from steadyloop.client import RunOptions, SteadyloopClient
from steadyloop.testing._scripted_server import ScriptedServer
from steadyloop.tools.examples import OUTBOX_DIR_ENV, SANDBOX_DIR_ENV, example_registry

DEMO_THREAD = "demo"
HOST = "127.0.0.1"


async def run_web_demo(
    out: TextIO,
    *,
    workdir: Path | None = None,
    port: int = 0,
    pace_s: float = 0.04,
) -> int:
    """Serve the demo on the page until SIGINT/SIGTERM; 0 when it stopped cleanly."""
    import uvicorn  # the web extra; `_demo_command` says so when it is missing

    def say(line: str = "") -> None:
        out.write(line + "\n")
        out.flush()

    with (
        _workspace(workdir) as (sandbox, outbox),
        _environment({SANDBOX_DIR_ENV: str(sandbox), OUTBOX_DIR_ENV: str(outbox)}),
    ):
        (sandbox / ORDER_PATH).parent.mkdir(parents=True, exist_ok=True)
        (sandbox / ORDER_PATH).write_text(ORDER_TEXT, encoding="utf-8")
        say("steadyloop demo --web: a durable tool loop behind a web page, all on this machine")
        async with (
            ScriptedServer(DemoProvider(pace_s=pace_s)) as provider,
            dev_server(
                data_converter=steadyloop_data_converter(sandbox.parent / "blobs")
            ) as server,
        ):
            say(f"  Temporal dev server  {server.address} (UI {server.ui_url})")
            say(f"  scripted provider    {provider.base_url}")
            say(f"  sandbox / outbox     {sandbox} / {outbox}")
            options = WorkerOptions(
                task_queue=f"steadyloop-demo-{uuid.uuid4().hex[:8]}",
                endpoints=EndpointRegistry([provider.endpoint(DEMO_ENDPOINT)]),
                tools=example_registry(),
            )
            client = SteadyloopClient(server.client, task_queue=options.task_queue)
            backend = ClientBackend(
                client,
                defaults=RunDefaults(endpoint=DEMO_ENDPOINT, model=DEMO_MODEL, tools=DEMO_TOOLS),
            )
            app = create_app(backend, web_settings({}, {}, dev=True))
            http = _quiet_server(uvicorn.Config(app, host=HOST, port=port, log_level="warning"))
            async with running_worker(server.client, options):
                serving = asyncio.create_task(http.serve())
                while not http.started:
                    if serving.done():
                        await serving  # it could not listen: say why
                        return 1
                    await asyncio.sleep(0.02)
                bound = http.servers[0].sockets[0].getsockname()[1]
                await client.thread(f"web/{DEV_TENANT}/{DEMO_THREAD}").start(
                    PROMPT,
                    options=RunOptions(
                        endpoint=DEMO_ENDPOINT,
                        model=DEMO_MODEL,
                        system_prompt=SYSTEM_PROMPT,
                        tools=DEMO_TOOLS,
                        limits=RunLimits(max_turns=8),
                    ),
                )
                url = f"http://{HOST}:{bound}/?thread={_public(DEMO_THREAD)}"
                say()
                say(f"Open the page: {url}")
                say("(the demo's run streams there; send it a follow-up from the page)")
                say("The server, the worker and the dev server stop when you press Ctrl-C.")
                await _wait_for_stop_signal()
                http.should_exit = True
                await serving
        say("steadyloop demo --web: stopped")
        return 0


def _public(name: str) -> str:
    """The thread's id as the server hands it to the page (`name~tag`)."""
    return f"{name}~{thread_tag(DEV_TENANT, name)}"


async def _wait_for_stop_signal() -> None:
    stop = asyncio.Event()
    remove = install_stop_signals(stop, lambda _signal: None)
    try:
        await stop.wait()
    finally:
        remove()


def _quiet_server(config: Any) -> Any:
    """uvicorn's server without its own signal handlers: the demo owns SIGINT/SIGTERM."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)
