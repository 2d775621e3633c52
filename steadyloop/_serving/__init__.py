"""What a worker serves, as a starter asks for it before a run starts (`steadyloop run`,
the client API's `Thread.start`, the web server through it).

A run that names no model or no tools takes the serving worker's: the model an endpoint
was configured with (`EndpointConfig.model`, from `--endpoint NAME=URL,model=M` or the
config file) and the worker's tool registry. The command line's own settings cannot
know them (the worker may run elsewhere, with another config file, `--tools` or
environment), so it asks: a short `DescribeWorkerWorkflow` on the run's task queue runs
the `steadyloop.describe_worker` activity on a worker that serves runs there, and the
answer decides the defaults and refuses a `--tool`, `--plugin` or endpoint typo before
the run starts, listing what the worker has. `unserved` is that rule for tools and
plugins, the one every starter holds a run to.

Nothing secret is described: endpoint names, default models and wires only, never a
base URL, a key variable or a header.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from steadyloop._run.bounds import WireApi

DESCRIBE_WORKER_ACTIVITY = "steadyloop.describe_worker"
DESCRIBE_WORKER_WORKFLOW = "DescribeWorkerWorkflow"


class ServedEndpoint(BaseModel):
    """One endpoint a worker can reach: its name, default model (None: none) and wire
    (what `steadyloop run` holds the run's sampling knobs to before it starts; a worker
    from before the wires says none, and spoke only chat)."""

    model_config = ConfigDict(frozen=True)

    name: str
    model: str | None = None
    api: WireApi = "chat"


class WorkerDescription(BaseModel):
    """A worker's endpoints and tools: every tool, those in no plugin (what a run offers
    by default), and its plugins (offered on demand by default)."""

    model_config = ConfigDict(frozen=True)

    endpoints: list[ServedEndpoint] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    unplugged_tools: list[str] = Field(default_factory=list)
    plugins: list[str] = Field(default_factory=list)

    def endpoint(self, name: str) -> ServedEndpoint | None:
        return next((e for e in self.endpoints if e.name == name), None)


class Unserved(BaseModel):
    """The tools and plugins a run names that a worker does not serve: the one rule every
    starter (the command line, the client API, the web server) holds a run to before it
    starts it, so the run is refused by name instead of failing at its first task."""

    model_config = ConfigDict(frozen=True)

    tools: list[str] = Field(default_factory=list)
    plugins: list[str] = Field(default_factory=list)

    def text(self, served: WorkerDescription, where: str) -> str:
        """What is missing and what `where` (e.g. "the worker on task queue 'q'") has."""
        parts = []
        for what, missing, known in (
            ("tools", self.tools, served.tools),
            ("plugins", self.plugins, served.plugins),
        ):
            if missing:
                parts.append(
                    f"{what} {', '.join(missing)}: not among the {what} of {where}; it has: "
                    f"{', '.join(known) or 'none'}{suggestion(missing[0], known)}"
                )
        return "; ".join(parts)


def unserved(
    served: WorkerDescription, tools: Sequence[str], plugins: Sequence[str] = ()
) -> Unserved | None:
    """What of `tools` and `plugins` `served` lacks, in the order named; None: nothing."""
    missing = Unserved(
        tools=[name for name in dict.fromkeys(tools) if name not in served.tools],
        plugins=[name for name in dict.fromkeys(plugins) if name not in served.plugins],
    )
    return missing if missing.tools or missing.plugins else None


def suggestion(name: str, known: Sequence[str]) -> str:
    """` (did you mean 'x'?)` for the known name closest to `name`, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


__all__ = [
    "DESCRIBE_WORKER_ACTIVITY",
    "DESCRIBE_WORKER_WORKFLOW",
    "ServedEndpoint",
    "Unserved",
    "WorkerDescription",
    "suggestion",
    "unserved",
]
