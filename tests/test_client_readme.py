"""The client page's "Start a run from your own code" (docs/client.md) runs as written,
and the example it points to (`examples/helpdesk/follow.py`) prints a run's events and
approves its call: both against a real dev server, a worker in this process and a
scripted provider."""

from __future__ import annotations

import io
import json
import os
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from client_harness import client_env
from docs_pages import section

from examples.helpdesk.agent import Desk, build_registry
from examples.helpdesk.follow import TOOLS, follow_and_approve
from steadyloop.client import RunOptions
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    text_response,
    tool_calls_response,
)
from steadyloop.tools.examples import example_registry

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def readme_block() -> str:
    text = section("client.md", "Start a run from your own code")
    block = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert block is not None, "the section has no python block"
    return block.group(1)


def _call(name: str, arguments: dict[str, Any]) -> ScriptedResponse:
    calls = [ScriptedCall(name, arguments, id="call_0")]
    return tool_calls_response(*calls)


def readme_provider(request: RecordedRequest) -> ScriptedResponse:
    last = request.messages[-1]
    if last["role"] == "tool":
        return text_response(f"2 + 3 = {last['content']}")
    if last["content"] == "What is 2 + 3?":
        return _call("add", {"a": 2, "b": 3})
    return text_response("20")


def helpdesk_provider(request: RecordedRequest) -> ScriptedResponse:
    last = request.messages[-1]
    if last["role"] == "tool":
        return text_response(f"Done: {last['content']}")
    return _call("refund", {"order_id": "A-17", "cents": 3450})


async def test_the_readme_section_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with client_env(
        tmp_path, tools=example_registry(), responder=readme_provider, endpoint="default"
    ) as env:
        # Only what docs/client.md says `connect` reads: the worker's own settings.
        for name in list(os.environ):
            if name.startswith(("TEMPORAL_", "STEADYLOOP_")):
                monkeypatch.delenv(name)
        monkeypatch.setenv("TEMPORAL_ADDRESS", env.server.address)
        monkeypatch.setenv("STEADYLOOP_TASK_QUEUE", env.client.task_queue)
        monkeypatch.setenv("STEADYLOOP_BLOB_DIR", str(tmp_path / "blobs"))
        source = "async def readme() -> None:\n" + textwrap.indent(readme_block(), "    ")
        scope: dict[str, Any] = {}
        exec(compile(source, "docs/client.md", "exec"), scope)
        await scope["readme"]()
        second = await env.client.thread("support-42").run(2).result()
    lines = capsys.readouterr().out.splitlines()
    kinds = [line.split()[1] for line in lines[:-2]]
    assert kinds[:2] == ["tool_call", "tool_result"] and kinds[-1] == "stop"
    assert set(kinds[2:-1]) == {"text_delta"}
    assert lines[-2:] == ["final_answer 2 + 3 = 5.0", "20"]
    # The follow-up answered with the first run's conversation in front of it.
    assert [m.content for m in second.transcript if m.role == "user"] == [
        "What is 2 + 3?",
        "And times 4?",
    ]


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "rejected"])
async def test_the_example_prints_the_events_and_decides_the_call(
    tmp_path: Path, approved: bool
) -> None:
    desk = Desk()
    async with client_env(tmp_path, tools=build_registry(desk), responder=helpdesk_provider) as env:
        options = RunOptions(endpoint="scripted", model="scripted-model", tools=TOOLS)
        run = await env.client.thread().start("Refund order A-17.", options=options)
        out = io.StringIO()
        result = await follow_and_approve(run, approve=lambda _: approved, out=out)
    printed = out.getvalue().splitlines()
    arguments = json.dumps({"order_id": "A-17", "cents": 3450}, separators=(",", ":"))
    assert printed[1] == f"-> refund {arguments}"
    verb = "approved" if approved else "rejected"
    assert re.fullmatch(
        rf"\?\? refund call_0 \(sha [0-9a-f]{{12}}\): {verb} 'refund' call 'call_0'", printed[2]
    )
    assert printed[-1] == "== stopped: final_answer"
    if approved:
        assert desk.refunds == [("A-17", 3450)]
        assert result.final_answer == "Done: refunded 3450 cents on A-17"
    else:
        assert desk.refunds == []
        assert result.final_answer is not None and "rejected" in result.final_answer


def test_the_page_shows_the_example_exactly_as_the_file_holds_it() -> None:
    """The client page copies `examples/helpdesk/follow.py` rather than including it (an
    include line shows as itself on GitHub): the copy must stay the file."""
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "client.md").read_text(encoding="utf-8")
    code = (root / "examples" / "helpdesk" / "follow.py").read_text(encoding="utf-8")
    assert f"```python\n{code.rstrip()}\n```" in page
    assert "--8<--" not in page
