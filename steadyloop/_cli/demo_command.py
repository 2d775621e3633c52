"""`steadyloop demo`: everything embedded (dev server, worker, scripted provider).

The demo modules import the scripted server and, with `--web`, the web extra: they are
imported only when the command runs, so the other commands start without them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from steadyloop._cli.arguments import (
    ArgumentParser,
)
from steadyloop._run.bounds import seconds_problem
from steadyloop._worker.config import (
    ConfigError,
)


def add_demo_parser(
    commands: argparse._SubParsersAction[ArgumentParser], connection: ArgumentParser
) -> argparse.ArgumentParser:
    """Register `demo` on `commands` (it needs no connection: it brings its own server)."""
    demo = commands.add_parser(
        "demo",
        help="everything embedded: dev server, worker, scripted provider; no key, no Docker",
    )
    demo.add_argument(
        "--scenario",
        choices=["conversation", "tour"],
        default="conversation",
        help="conversation: one run that needs nobody (default); tour: stops for you to "
        "approve, send, interrupt, resume and resolve from another terminal",
    )
    demo.add_argument(
        "--keep-running", action="store_true", help="keep the dev server and UI up until Ctrl-C"
    )
    demo.add_argument("--workdir", type=Path, help="sandbox and outbox here (default: a temp dir)")
    demo.add_argument(
        "--pace",
        type=float,
        default=0.04,
        metavar="SECONDS",
        help="pause between chunks",
    )
    demo.add_argument(
        "--web",
        action="store_true",
        help="serve the demo on a web page (the web extra) and print its address",
    )
    demo.add_argument("--port", type=int, default=0, help="--web: the page's port (default: free)")
    demo.set_defaults(handler=demo_command)
    return demo


def demo_command(args: argparse.Namespace) -> int:
    """The `demo` handler."""
    from steadyloop._cli.demo import run_demo  # imports the scripted server; only here

    problem = seconds_problem(args.pace, zero_allowed=True)
    if problem is not None:
        raise ConfigError(f"--pace {problem}")
    if args.web:
        return _web_demo(args)
    if args.scenario == "tour":
        from steadyloop._cli.demo_tour import run_tour

        return asyncio.run(
            run_tour(
                sys.stdout, workdir=args.workdir, pace_s=args.pace, keep_running=args.keep_running
            )
        )
    return asyncio.run(
        run_demo(sys.stdout, workdir=args.workdir, keep_running=args.keep_running, pace_s=args.pace)
    )


def _web_demo(args: argparse.Namespace) -> int:
    if args.scenario != "conversation":
        raise ConfigError("--web serves the conversation demo; leave out --scenario tour")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port (0 to 65535)")
    try:
        from steadyloop._cli.demo_web import run_web_demo
    except ImportError as exc:
        raise ConfigError(
            f"--web needs the web extra ({exc.name} is missing): pip install 'steadyloop[web]'"
        ) from None
    return asyncio.run(
        run_web_demo(sys.stdout, workdir=args.workdir, port=args.port, pace_s=args.pace)
    )
