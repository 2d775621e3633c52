"""The web surface: `steadyloop serve`, runs on threads over HTTP with resumable SSE.

Guarantees: the server holds no state of its own (every answer comes from Temporal
through the client API), so processes behind a load balancer are interchangeable;
every event carries its cursor as the SSE `id:`, and a client that reconnects with it
misses and repeats nothing; a tenant comes from its bearer token only, and another
tenant's thread is 404 everywhere; bad input is a 4xx naming the field, and starts
nothing. Routes: `steadyloop._web.app`. AG-UI: `steadyloop._web.agui`. Clients of one
run share one read of its log: the client's (`steadyloop.client._fanout`), whose buffer is
`run_buffer`. Settings and tokens: `steadyloop._web.settings`. The page at
`/`: `steadyloop._web.page_routes`, its files in `steadyloop/_web/page/`.

Needs the `web` extra (`pip install 'steadyloop[web]'`); importing this package does not
(the command line imports `steadyloop._web.cli` whether or not the extra is installed).
"""

from __future__ import annotations

from typing import Any

__all__ = ["WebSettings", "create_app", "token_sha256", "web_settings"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from steadyloop._web.app import create_app

        return create_app
    if name in ("WebSettings", "token_sha256", "web_settings"):
        from steadyloop._web import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'steadyloop._web' has no attribute {name!r}")
