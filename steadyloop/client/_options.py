"""`RunOptions`: how a thread's runs are configured, apart from what they are asked.

A `RunInput` is its configuration (`RunSettings`: model, tools, limits...) plus the
conversation (prompt, messages) and fields only the library sets (a continued run's
`carried` state, a resumed run's `inherited` receipts, a child's `lineage`). A caller of
the client gives the configuration alone; the thread supplies the rest (the prompt, and
for a follow-up the previous run's transcript and receipts). `RunOptions` is
`RunSettings` itself, so its fields and types are `RunInput`'s by construction; it is
checked as a run would be when built, so a typo in a limit is refused before anything
is started.

One default differs from `RunInput`'s: forwarding is on, because a program following a
run through the client wants its text as it streams (`handle.events()`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

from pydantic import ConfigDict, Field, model_validator

from steadyloop._chat import ChatMessage
from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._run.models import RunInput, RunSettings

__all__ = ["CONVERSATION_FIELDS", "RunOptions"]

# `RunInput` fields a caller of the client never sets: the thread fills them in.
CONVERSATION_FIELDS = frozenset(RunInput.model_fields) - frozenset(RunSettings.model_fields)


class RunOptions(RunSettings):
    """A run's configuration, as `RunSettings` names it (see its fields for what each
    does). Frozen, and an unknown field is refused by name (`extra="forbid"`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    forwarding: ForwardingOptions = Field(default_factory=lambda: ForwardingOptions(enabled=True))

    @model_validator(mode="after")
    def _a_run_could_carry_them(self) -> Self:
        """Refuse now what `RunInput` would refuse at start (no model, a tool_choice
        naming a tool not offered...), with its words."""
        self.run_input(prompt="(checking the options)")
        return self

    @classmethod
    def of(cls, run: RunInput) -> RunOptions:
        """The configuration a run was started with (its conversation left out)."""
        return cls.model_validate(_settings(run))

    def run_input(
        self, *, prompt: str | None = None, messages: Sequence[ChatMessage] = ()
    ) -> RunInput:
        """A first run's input: these options, asked `prompt` after `messages`."""
        return RunInput.model_validate(
            _settings(self) | {"prompt": prompt, "messages": list(messages)}
        )

    def unchecked_input(self) -> RunInput:
        """These options as a `RunInput` with no conversation yet, unvalidated: the
        original a follow-up is built from (`resume_input`), validated once whole."""
        return RunInput.model_construct(**_settings(self))


def _settings(model: RunSettings) -> dict[str, Any]:
    """`model`'s configuration fields, values as they are (not dumped)."""
    return {name: value for name, value in model if name in RunSettings.model_fields}
