"""`RunOptions`: how a thread's runs are configured, apart from what they are asked.

A `RunInput` mixes two things: the run's configuration (model, tools, limits...) and its
conversation (prompt, messages), plus fields only the library sets (a continued run's
`carried` state, a resumed run's `inherited` receipts, a child's `lineage`). A caller of
the client gives the first alone; the thread supplies the conversation (the prompt, and
for a follow-up the previous run's transcript and receipts). The fields and their types
are `RunInput`'s (a test keeps the two in step), checked when the options are built, so
a typo in a limit is refused before anything is started.

One default differs from `RunInput`'s: forwarding is on, because a program following a
run through the client wants its text as it streams (`handle.events()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from steadyloop.chat import ChatMessage
from steadyloop.output.forwarding import ForwardingOptions
from steadyloop.routing.pricing import Price
from steadyloop.routing.provider_profiles import ProviderProfile
from steadyloop.routing.route_plan import RouteConfig
from steadyloop.run.bounds import Identity, Text
from steadyloop.run.models import (
    AgentName,
    ContinuationOptions,
    Delegation,
    LocalToolSeconds,
    RunInput,
    RunLimits,
    RunPlugins,
    Sampling,
    ToolChoiceSetting,
)

__all__ = ["CONVERSATION_FIELDS", "RunOptions"]

# `RunInput` fields a caller of the client never sets: the thread fills them in.
CONVERSATION_FIELDS = frozenset(
    {"prompt", "messages", "lineage", "parent_agent", "carried", "inherited"}
)


class RunOptions(BaseModel):
    """A run's configuration, as `RunInput` names it (see its fields for what each does)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str = ""
    model: str = ""
    route: RouteConfig | None = None
    system_prompt: Text | None = None
    tools: list[Identity] = Field(default_factory=list)
    plugins: RunPlugins = Field(default_factory=RunPlugins)
    limits: RunLimits = Field(default_factory=RunLimits)
    sampling: Sampling = Field(default_factory=Sampling)
    continuation: ContinuationOptions = Field(default_factory=ContinuationOptions)
    tool_choice: ToolChoiceSetting | None = None
    reset_tool_choice: bool = True
    prefill: Text | None = Field(default=None, min_length=1)
    tenant_id: Identity = "default"
    forwarding: ForwardingOptions = Field(default_factory=lambda: ForwardingOptions(enabled=True))
    local_pure_tools_s: LocalToolSeconds | None = None
    provider_profile: ProviderProfile = "portable"
    prices: dict[str, Price] = Field(default_factory=dict)
    agent: AgentName = "main"
    delegation: Delegation | None = None

    @model_validator(mode="after")
    def _a_run_could_carry_them(self) -> Self:
        """Refuse now what `RunInput` would refuse at start (no model, a tool_choice
        naming a tool not offered...), with its words."""
        self.run_input(prompt="(checking the options)")
        return self

    @classmethod
    def of(cls, run: RunInput) -> RunOptions:
        """The configuration a run was started with (its conversation left out)."""
        return cls.model_validate({name: getattr(run, name) for name in cls.model_fields})

    def run_input(
        self, *, prompt: str | None = None, messages: Sequence[ChatMessage] = ()
    ) -> RunInput:
        """A first run's input: these options, asked `prompt` after `messages`."""
        fields: dict[str, Any] = {name: getattr(self, name) for name in type(self).model_fields}
        return RunInput.model_validate(fields | {"prompt": prompt, "messages": list(messages)})

    def unchecked_input(self) -> RunInput:
        """These options as a `RunInput` with no conversation yet, unvalidated: the
        original a follow-up is built from (`resume_input`), validated once whole."""
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        return RunInput.model_construct(**fields)
