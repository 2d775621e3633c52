"""Resuming a run that stopped, as a new run: explicitly, because only a person can decide.

A run that stopped `output_interrupted` was not repeated on purpose (someone had read
part of its answer); one a person interrupted mid-answer kept what they had read too.
Going on is a new run with the same configuration, whose conversation is the stopped
run's transcript, plus the partial answer the person saw (so the model continues from
what was shown instead of starting over), plus a user message asking it to go on. The
stopped run's transcript already begins with its system prompt, so it is not added twice.

That message says what is true of how the run stopped (`stops.stop_text.resume_prompt`):
an answer cut off (by the token limit, a failed stream, an interrupt, the deadline or
the budget) is asked to go on from where it stopped; a run stopped between turns is
asked to carry on with its task. A run that ended with a final answer was not cut off,
and telling the model it was would make it invent a continuation of a finished answer:
resuming one is refused (`NothingToResume`) unless the caller says what to ask next (a
follow-up `prompt`), which then goes after the answer.
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

from collections.abc import Sequence
from enum import Enum
from typing import Final, Literal

from steadyloop._chat import ChatMessage
from steadyloop._run.models import InheritedReceipts, RunInput, RunPlugins, RunResult
from steadyloop._stops.stop_text import resume_prompt
from steadyloop.errors import SteadyloopError


class _Truthful(Enum):
    TRUTHFUL = "the message that says how the run stopped"


# `resume_input`'s default prompt: the one that says what is true of the stop.
TRUTHFUL: Final = _Truthful.TRUTHFUL


class NothingToResume(SteadyloopError, ValueError):
    """The run ended with a final answer: there is nothing to go on from, only a
    follow-up question a person must write."""


def resume_input(
    original: RunInput,
    result: RunResult,
    *,
    prompt: str | Literal[_Truthful.TRUTHFUL] | None = TRUTHFUL,
    then: Sequence[ChatMessage] = (),
) -> RunInput:
    """The input of a run that carries on from `result` with `original`'s configuration.

    `prompt`: the user message that asks to go on (default: the one for how `result`
    stopped, `resume_prompt`; None: no message, the conversation as it stands).
    `then`: messages appended after it (a follow-up given as messages, not one prompt).
    """
    if prompt is TRUTHFUL:
        prompt = resume_prompt(result)
        if prompt is None:
            raise NothingToResume(
                f"the run ended with {result.stop_reason!r}: its answer is complete, so there "
                "is nothing to continue; to ask a follow-up question, give the prompt to send "
                "after the answer"
            )
    elif result.stop_reason == "final_answer" and not (prompt and prompt.strip()) and not then:
        raise NothingToResume(
            "the run ended with a final answer: resuming it needs a follow-up prompt"
        )
    messages = list(result.transcript)
    if result.partial is not None and result.partial.text.strip():
        messages.append(ChatMessage(role="assistant", content=result.partial.text))
    if prompt:
        messages.append(ChatMessage(role="user", content=prompt))
    messages.extend(then)
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
