"""A model you script turn by turn, for testing your own agent without a key.

    model = (
        ScriptedModel()
        .calls("lookup_order", order_id="A-17")      # turn 1: one tool call
        .rate_limited(retry_after=30)                # turn 2's first attempt: a 429
        .says("Order A-17 shipped on Monday.")       # turn 2, retried: the final answer
    )

Each request the run sends consumes the next scripted response, in order: a fault
(`rate_limited`, `errors`, `cuts_stream`, `disconnects`) spends one attempt, and the
loop's retry gets the next entry, exactly as a real provider's failure would. Answers
are streamed over real HTTP by `ScriptedServer` in OpenAI's chunk format, with a usage
chunk, so the run counts tokens as it would against a provider.

What this does not do: decide from the request. A run that asks more often than the
script has entries gets a 400 naming the request, and `AgentEnv.run` raises
`ScriptExhausted` with what the model was sent last, because an unscripted request is
always a bug in the test. A 400 because the loop does not retry it (it is the request's
fault, as sent): the run stops at the first unscripted request, where a 500 was retried
until the run's model attempts were spent, each attempt logging its failure. For a
model that answers from the transcript, pass your own responder to `ScriptedServer`
(as `steadyloop demo` does).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from steadyloop.errors import SteadyloopError
from steadyloop.testing._chunks import (
    ScriptedCall,
    finish_chunk,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing._scripted_server import (
    RecordedRequest,
    ScriptedResponse,
    disconnect,
    error_response,
    sse_response,
)


@dataclass(frozen=True)
class Call:
    """One tool call the model makes: the tool, its arguments, and (optionally) its id.

    `arguments` is a dict (sent as JSON) or a str sent verbatim, to test how your agent
    takes malformed arguments (`call("lookup", raw='{"id": ')`).
    """

    tool: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


def call(tool: str, /, *, raw: str | None = None, **arguments: Any) -> Call:
    """A tool call: `call("send_email", to="ana@example.com")`; `raw=` sends text verbatim."""
    if raw is not None and arguments:
        raise ValueError("give the arguments as keywords or as raw text, not both")
    return Call(tool, raw if raw is not None else dict(arguments))


# In the error every unscripted request is answered with; AgentEnv drops the worker's
# log of the model activity failing on it (`ScriptExhausted` says it all).
UNSCRIPTED = "no turn scripted for request"


class ScriptExhausted(SteadyloopError, AssertionError):
    """The run asked the scripted model for more turns than were scripted."""


class UnknownToolWarning(SteadyloopError, UserWarning):
    """The script calls a tool the run does not offer (a misspelt name, most often).

    The run answers such a call with an error the model reads and goes on, so the test
    can pass without the tool ever running. Where the unknown tool is the point of the
    test, silence it with
    `@pytest.mark.filterwarnings("ignore::steadyloop.testing.UnknownToolWarning")`.
    """


class ScriptedModel:
    """A queue of model answers (turns and faults), consumed one per request.

    Builder methods return the model itself, so a script reads as one chained
    expression. `requests` holds every request the model received, in order, so a test
    can assert what the agent sent (the tool answers, a person's message).
    """

    def __init__(self, name: str = "scripted-model") -> None:
        self.name = name
        self._script: deque[ScriptedResponse] = deque()
        self._turns = 0
        self.requests: list[RecordedRequest] = []
        self.unscripted: list[RecordedRequest] = []
        self.scripted_tools: list[str] = []  # the tools the scripted turns call, in order

    # -- turns ---------------------------------------------------------------------------

    def says(self, text: str) -> ScriptedModel:
        """A turn that answers in text (finish reason `stop`): the run's final answer."""
        return self.turn(text=text)

    def calls(self, tool: str, /, **arguments: Any) -> ScriptedModel:
        """A turn with one tool call, its arguments as keywords."""
        return self.turn(Call(tool, dict(arguments)))

    def turn(self, *calls: Call, text: str | None = None) -> ScriptedModel:
        """A turn with any number of tool calls (run as one batch), and text before them.

        Calls without an id get `call_<turn>_<n>`, unique across the script, the way
        OpenAI's ids are (use `Call(id=...)` to reproduce a server that reuses ids).
        """
        if not calls and text is None:
            raise ValueError("a turn needs text or at least one call")
        self._turns += 1
        chunks: list[dict[str, Any]] = text_chunks(text) if text is not None else []
        if calls:
            self.scripted_tools += [c.tool for c in calls]
            scripted = [
                ScriptedCall(c.tool, c.arguments, id=c.id or f"call_{self._turns}_{n}")
                for n, c in enumerate(calls)
            ]
            chunks += tool_call_chunks(scripted, role=text is None)
        finish = "tool_calls" if calls else "stop"
        completion = max(1, len(json.dumps(chunks)) // 64)
        self._script.append(
            sse_response([*chunks, finish_chunk(finish), usage_chunk(10, completion)])
        )
        return self

    # -- faults (each spends one attempt; the retry gets the next entry) ------------------

    def rate_limited(self, retry_after: float | None = None) -> ScriptedModel:
        """A 429, with `Retry-After` seconds when given (the run waits at least that long,
        in workflow time: the test server skips it while you await the result)."""
        self._script.append(
            error_response(
                429, "rate limited (scripted)", type="rate_limit_error", retry_after=retry_after
            )
        )
        return self

    def errors(self, status: int = 500, message: str = "scripted server error") -> ScriptedModel:
        """A non-2xx answer with OpenAI's error body (5xx is retried; most 4xx are not)."""
        kind = "server_error" if status >= 500 else "invalid_request_error"
        self._script.append(error_response(status, message, type=kind))
        return self

    def cuts_stream(self, text: str = "Let me check") -> ScriptedModel:
        """A stream that sends `text`, then the connection closes mid-body (no finish)."""
        self._script.append(sse_response(text_chunks(text), done=False, ending="close"))
        return self

    def disconnects(self) -> ScriptedModel:
        """The connection closes before any status line."""
        self._script.append(disconnect())
        return self

    def sends(self, response: ScriptedResponse) -> ScriptedModel:
        """Any response `steadyloop.testing` can build (a stall, a malformed stream...)."""
        self._script.append(response)
        return self

    # -- what the test reads ---------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Scripted entries not yet consumed."""
        return len(self._script)

    @property
    def offered_tools(self) -> set[str]:
        """Every tool name any request offered the model (its `tools` list)."""
        names: set[str] = set()
        for request in self.requests:
            body = request.json
            tools = body.get("tools") if isinstance(body, dict) else None
            for spec in tools if isinstance(tools, list) else []:
                function = spec.get("function") if isinstance(spec, dict) else None
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    names.add(function["name"])
        return names

    def sent_messages(self, request: int = -1) -> list[dict[str, Any]]:
        """The `messages` of one request as the model received them (default: the last)."""
        body = self.requests[request].json
        messages = body.get("messages") if isinstance(body, dict) else None
        return list(messages) if isinstance(messages, list) else []

    def respond(self, request: RecordedRequest) -> ScriptedResponse:
        """The next scripted entry for `request` (called by the scripted server)."""
        self.requests.append(request)
        if self._script:
            return self._script.popleft()
        self.unscripted.append(request)
        return error_response(
            400,  # not retried: the run stops here (see the module docstring)
            f"scripted model {self.name!r}: {UNSCRIPTED} #{len(self.requests)}",
            type="unscripted",
        )

    def check_script(self) -> None:
        """Raise `ScriptExhausted` if the run asked for more than was scripted."""
        if not self.unscripted:
            return
        last = self.unscripted[0].json
        messages = last.get("messages", []) if isinstance(last, dict) else []
        tail = json.dumps(messages[-3:], ensure_ascii=False)[:1500]
        raise ScriptExhausted(
            f"the run sent {len(self.requests)} request(s) to scripted model {self.name!r} "
            f"but only {len(self.requests) - len(self.unscripted)} were scripted; script one "
            f"more turn (.says(...) or .calls(...)). The first unscripted request ended with: "
            f"{tail}"
        )
