"""Resuming a run that stopped, as a new run: explicitly, because only a person can decide.

A run that stopped `output_interrupted` was not repeated on purpose (someone had read
part of its answer); one a person interrupted mid-answer kept what they had read too.
Going on is a new run with the same configuration, whose conversation is the stopped
run's transcript, plus the partial answer the person saw (so the model continues from
what was shown instead of starting over), plus a user message asking it to go on. The
stopped run's transcript already begins with its system prompt, so it is not added twice.
Plugins the stopped run activated are core in the new one: its transcript already shows
the model they are active.

The new run inherits the stopped run's receipts (`RunInput.inherited`) under the same
key scope (the stopped run's workflow id, or the scope it inherited itself), so a call
the stopped run completed replays instead of running its effect again, and a call it
left without an outcome (an opaque attempt that may have taken effect) is listed as
ambiguous in the new run, for a person to resolve there. The receipts were packed
against the stopped run's transcript, which the new run's messages begin with, so the
references stay valid. A result from before receipts were recorded (`receipt_scope`
None) carries none: the new run starts its own ledger.
"""

from __future__ import annotations

from steadyloop.chat import ChatMessage
from steadyloop.run.models import InheritedReceipts, RunInput, RunPlugins, RunResult

DEFAULT_RESUME_PROMPT = "Your previous answer was cut off. Continue from where it stopped."


def resume_input(
    original: RunInput, result: RunResult, *, prompt: str | None = DEFAULT_RESUME_PROMPT
) -> RunInput:
    """The input of a run that carries on from `result` with `original`'s configuration."""
    messages = list(result.transcript)
    if result.partial is not None and result.partial.text.strip():
        messages.append(ChatMessage(role="assistant", content=result.partial.text))
    if prompt:
        messages.append(ChatMessage(role="user", content=prompt))
    if not messages:
        raise ValueError("the stopped run has no conversation to resume")
    plugins = original.plugins
    if plugins.named:
        plugins = RunPlugins(core=result.active_plugins, on_demand=result.activatable_plugins)
    inherited = None
    if result.receipt_scope is not None and result.receipts is not None:
        inherited = InheritedReceipts(scope=result.receipt_scope, receipts=result.receipts)
    return original.model_copy(
        update={
            "messages": messages,
            "prompt": None,
            "system_prompt": None,
            "carried": None,
            "inherited": inherited,
            "plugins": plugins,
        }
    )
