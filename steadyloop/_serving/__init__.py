"""What a worker serves, as `steadyloop run` asks for it before a run starts.

A run that names no model or no tools takes the serving worker's: the model an endpoint
was configured with (`EndpointConfig.model`, from `--endpoint NAME=URL,model=M` or the
config file) and the worker's tool registry. The command line's own settings cannot
know them (the worker may run elsewhere, with another config file, `--tools` or
environment), so it asks: a short `DescribeWorkerWorkflow` on the run's task queue runs
the `steadyloop.describe_worker` activity on a worker that serves runs there, and the
answer decides the defaults and refuses a `--tool`, `--plugin` or endpoint typo before
the run starts, listing what the worker has.

Nothing secret is described: endpoint names, default models and wires only, never a
base URL, a key variable or a header.
"""

from __future__ import annotations

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


__all__ = [
    "DESCRIBE_WORKER_ACTIVITY",
    "DESCRIBE_WORKER_WORKFLOW",
    "ServedEndpoint",
    "WorkerDescription",
]
