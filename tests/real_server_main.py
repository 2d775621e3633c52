"""A third-party server as its own process, for the real-server tests.

    python tests/real_server_main.py llamacpp --model M.gguf --chat-template T.jinja
    python tests/real_server_main.py llmock

Either prints `LISTENING <url>` once it accepts connections (port 0: the OS picks a
free port, so two runs never collide) and serves until SIGTERM. A process of its own,
not a thread of the test process: llama.cpp's threads and uvicorn's event loop stay
out of pytest's, and stopping it is a signal, whatever state the server is in.

llama.cpp runs with one thread: with as many threads as cores, its decoding collapsed
about fifty-fold whenever another process wanted a core (measured on these 2-core
machines). `sse_ping_interval` is 1 s, so a request that waits more than a second for
its first token gets SSE comment events (pings) before it, as a busy server sends them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

LISTENING = "LISTENING"
MODEL_ALIAS = "smollm2"
CONTEXT_TOKENS = 2048


def serve_llamacpp(model: Path, chat_template: Path) -> None:
    import xllamacpp

    params: Any = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {MODEL_ALIAS}  # answers name the alias, not this machine's path
    params.chat_template = chat_template.read_text(encoding="utf-8")
    params.use_jinja = True
    params.n_ctx = CONTEXT_TOKENS
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.sse_ping_interval = 1
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.offline = True
    params.ui = False
    server = xllamacpp.Server(params)
    print(f"{LISTENING} {server.listening_address}", flush=True)
    signal.pause()


def serve_llmock() -> None:
    from llmock.chaos import ChaosSettings
    from llmock.simulation import MockResponseSettings
    from llmock.testing import LLMockServer

    # No random chaos and a fixed reply style: every fault is one the test asked for.
    responses = MockResponseSettings(response_style="static", tool_mode="auto")
    server = LLMockServer(port=0, chaos=ChaosSettings(), responses=responses).start()
    print(f"{LISTENING} {server.url}", flush=True)
    signal.pause()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    servers = parser.add_subparsers(dest="server", required=True)
    llamacpp = servers.add_parser("llamacpp")
    llamacpp.add_argument("--model", type=Path, required=True)
    llamacpp.add_argument("--chat-template", type=Path, required=True)
    servers.add_parser("llmock")
    args = parser.parse_args(argv)
    # Exit at once: finalizing a running llama.cpp server from Python can block.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if args.server == "llamacpp":
        serve_llamacpp(args.model, args.chat_template)
    else:
        serve_llmock()


if __name__ == "__main__":
    main(sys.argv[1:])
