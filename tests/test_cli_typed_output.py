"""`steadyloop run --output-schema FILE` as a user meets it: a worker and the command as
separate processes against a Temporal dev server and a scripted provider.

What a user relies on: a valid answer is printed as the run's output (JSON) and exits 0;
prose every time stops `invalid_output` (exit 3) with what failed and the last answer's
text; a schema file that cannot be used is refused before anything starts, naming it.
The lines docs/typed-output.md shows are the lines the command printed.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from test_cli_worker import (
    cli_environment,
    start_worker,
    steadyloop,
    temporal,  # noqa: F401  (the fixture)
    workspace,  # noqa: F401  (the fixture)
)

from steadyloop._worker.dev_server import DevServer
from steadyloop.testing import ScriptedServer, text_response

pytestmark = pytest.mark.slow

PAGE = Path(__file__).resolve().parent.parent / "docs" / "typed-output.md"


def documented_lines() -> list[str]:
    """The lines of the page's `steadyloop run` output block."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("```text", text.index("as tests/test_cli_typed_output.py pins it")) + len(
        "```text\n"
    )
    return text[start : text.index("```", start)].splitlines()


SCHEMA = {
    "title": "RefundDecision",
    "type": "object",
    "properties": {"approve": {"type": "boolean"}, "amount_cents": {"type": "integer"}},
    "required": ["approve", "amount_cents"],
}


async def test_a_typed_run_prints_its_output_or_stops_invalid_output(
    temporal: DevServer,  # noqa: F811
    workspace: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    schema = tmp_path / "refund.json"
    schema.write_text(json.dumps(SCHEMA))
    queue = f"q-{uuid.uuid4().hex[:8]}"
    connection = ["--address", temporal.address, "--task-queue", queue]
    environ = cli_environment(STEADYLOOP_MODEL="scripted-model")
    prose = [text_response(f"I would refund it ({n}).") for n in range(3)]
    script = [text_response('{"approve": true, "amount_cents": 1200}'), *prose]
    async with ScriptedServer(script) as provider:
        worker = await start_worker(
            *connection,
            "--endpoint",
            f"scripted={provider.base_url}",
            environ=cli_environment(**workspace),
        )
        try:
            typed_run = ["--endpoint", "scripted", "--no-tools", "--output-schema", str(schema)]
            code, out = await steadyloop(
                "run", "refund order 7?", *connection, *typed_run, "--id", "typed-ok",
                environ=environ,
            )  # fmt: skip
            print(out)
            assert code == 0, out
            assert 'output:\n  {\n    "approve": true,\n    "amount_cents": 1200\n  }' in out
            assert "stop reason: final_answer" in out

            code, out = await steadyloop(
                "run", "refund order 7?", *connection, *typed_run, "--id", "typed-prose",
                environ=environ,
            )  # fmt: skip
            print(out)
            assert code == 3, out
            assert "raw output (not valid):\n  I would refund it (2)." in out
            assert (
                "stop reason: invalid_output: the answer is not valid RefundDecision output "
                "after 2 extra turn(s) asking again: the answer is not JSON: expecting value "
                "at line 1, column 1\n" in out
            )
            assert "retries: invalid_output 2" in out
            printed = out.splitlines()
            assert [line for line in documented_lines() if line not in printed] == []
        finally:
            assert await worker.stop() == 0, worker.output
        requests = provider.requests
    sent = [r.json.get("response_format", {}).get("json_schema", {}).get("name") for r in requests]
    assert sent == ["RefundDecision"] * 4


async def test_a_schema_file_that_cannot_be_used_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    code, out = await steadyloop(
        "run", "x", "--endpoint", "e", "--model", "m", "--output-schema", str(missing),
        environ=cli_environment(),
    )  # fmt: skip
    assert code == 2, out
    assert f"--output-schema {missing}: cannot be read" in out
