"""The page in Chromium against the whole system: a dev server, a real `steadyloop worker`
and a real `steadyloop serve`, each its own process, killed with SIGKILL where a check
says so.

What decides each outcome is what a person reads and what happened once: the text the
page shows against the run's final answer (read from Temporal, not from the server),
the cursors the page received off the wire, and the lines in the outbox.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from browser_harness import chromium
from playwright.async_api import Page
from polling import eventually
from web_harness import (
    WebStack,
    paced_answer,
    run_workflow,
    start_thread_run,
    tool_answers,
    web_stack,
)

from steadyloop._output.forwarding import ForwardingOptions
from steadyloop._run.models import RunInput, RunResult
from steadyloop._workflows.output_stream import OutputStreamSummary
from steadyloop.events import parse_cursor
from steadyloop.testing import (
    RecordedRequest,
    ScriptedCall,
    ScriptedResponse,
    finish_chunk,
    reasoning_chunks,
    sse_response,
    text_response,
    tool_call_chunks,
    tool_calls_response,
)

pytestmark = pytest.mark.slow

# Words with multi-byte characters, so "byte for byte" compares more than ASCII.
WORDS = [f"w{n}{'é→日🙂'[n % 4]} " for n in range(40)]
ANSWER = "".join(WORDS)
PACE_S = 0.1  # 40 words: about 4 s of streaming to act in
DONE_GUARD_MS = 60_000  # a hang guard, not a speed assertion


def streaming(request: RecordedRequest) -> ScriptedResponse:
    return paced_answer(WORDS, PACE_S)


async def ask(page: Page, stack: WebStack, prompt: str) -> str:
    """Open the page, send `prompt`, and return the thread id the page created."""
    await page.goto(stack.page_url())
    await page.fill("#composer textarea", prompt)
    await page.click("#composer button[type=submit]")
    await page.locator(".turn .answer").filter(has_text=WORDS[4]).wait_for()
    thread = parse_qs(urlsplit(page.url).query)["thread"][0]
    return thread


async def received(page: Page) -> list[str]:
    ids = await page.evaluate("window.steadyloop.stream.received")
    assert isinstance(ids, list)
    return [str(i) for i in ids]


def assert_strictly_increasing(ids: list[str]) -> None:
    cursors = [parse_cursor(i) for i in ids]
    assert cursors == sorted(set(cursors)), ids


async def test_2_the_server_killed_mid_stream_and_restarted_the_page_reconnects_by_itself(
    tmp_path: Path,
) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        await stack.start_worker()
        server = await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            thread = await ask(page, stack, "Write forty words.")
            await server.kill()
            await page.locator("#connection").filter(has_text="reconnecting").wait_for()
            await stack.start_server()  # the same port: the page's address is unchanged
            text = await shown(page)
            ids = await received(page)
        answer = await final_answer(stack, thread)
        assert text.encode("utf-8") == answer.encode("utf-8") == ANSWER.encode("utf-8")
        # One pass over the log across the cut: every cursor once, in order, none skipped.
        assert_strictly_increasing(ids)
        assert [parse_cursor(i).offset for i in ids] == list(range(len(ids)))


async def result_of(stack: WebStack, thread: str, run: str = "1") -> RunResult:
    handle = stack.client.get_workflow_handle(
        run_workflow("tenant-a", thread, run), result_type=RunResult
    )
    result = await handle.result()
    assert isinstance(result, RunResult)
    return result


async def final_answer(stack: WebStack, thread: str, run: str = "1") -> str:
    """The run's final answer as Temporal holds it (not as the server relays it)."""
    answer = (await result_of(stack, thread, run)).final_answer
    assert isinstance(answer, str)
    return answer


async def shown(page: Page) -> str:
    await page.wait_for_selector("#stop[data-reason]", timeout=DONE_GUARD_MS)
    return await page.locator(".turn .answer").text_content() or ""


async def test_1_a_tab_closed_mid_answer_and_opened_again_shows_the_answer_byte_for_byte(
    tmp_path: Path,
) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            context = await browser.new_context()
            page = await context.new_page()
            thread = await ask(page, stack, "Write forty words.")
            assert await page.locator("#stop").is_hidden(), "the answer ended before the close"
            before = await received(page)
            await page.close()

            again = await context.new_page()
            await again.goto(stack.page_url(thread))
            text = await shown(again)
            assert await again.get_attribute("#stop", "data-reason") == "final_answer"
            answer = await final_answer(stack, thread)
            assert answer == ANSWER
            assert text.encode("utf-8") == answer.encode("utf-8")
            assert await again.text_content("#log .user .said") == "Write forty words."
            assert_strictly_increasing(before)
            after = await received(again)
            assert_strictly_increasing(after)
            assert parse_cursor(after[0]).offset == 0  # a new tab reads the run from its start


async def test_1_a_reload_mid_answer_continues_after_its_cursor(tmp_path: Path) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            thread = await ask(page, stack, "Write forty words.")
            assert await page.locator("#stop").is_hidden(), "the answer ended before the reload"
            before = await received(page)
            await page.wait_for_timeout(300)  # past the page's save interval
            await page.reload()
            text = await shown(page)
            answer = await final_answer(stack, thread)
            assert text.encode("utf-8") == answer.encode("utf-8") == ANSWER.encode("utf-8")
            # The reloaded tab rendered what it had saved, then read on after the saved
            # cursor: every event applied once, in order, and only the rest off the wire.
            applied = await page.evaluate("window.steadyloop.stream.applied.map(a => a[0])")
            after = await received(page)
            assert_strictly_increasing(applied)
            assert 0 < len(after) < len(applied) and applied[-len(after) :] == after
            assert_strictly_increasing(before)


async def test_3_a_worker_killed_mid_answer_shows_output_interrupted_with_exactly_the_text_shown(
    tmp_path: Path,
) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        worker = await stack.start_worker()
        await stack.start_server()
        # Started from code, with a model heartbeat timeout of 2 s: the lost attempt is
        # found in seconds rather than the default 150.
        thread = await start_thread_run(
            stack, "killed", "Write forty words.", model_heartbeat_timeout_s=2
        )
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url(thread))
            await page.locator(".turn .answer").filter(has_text=WORDS[5]).wait_for()
            await worker.kill()
            await stack.start_worker()  # the run's next workflow task needs a worker
            await page.wait_for_selector(
                '#stop[data-reason="output_interrupted"]', timeout=DONE_GUARD_MS
            )
            text = await page.locator(".turn .answer").text_content() or ""
            partial = await page.locator("#stop .partial").text_content()
            stop_text = await page.locator("#stop").text_content() or ""
            result = await result_of(stack, thread)
        assert result.stop_reason == "output_interrupted"
        assert result.partial is not None
        # What the page shows, what it says was shown, and what the run kept are one text,
        # cut somewhere in the answer.
        assert text == partial == result.partial.text
        assert WORDS[5] in text and ANSWER.startswith(text) and text != ANSWER
        assert "partial answer (shown before the stop)" in stop_text, stop_text


REFUND = ScriptedCall("refund", {"order_id": "A-17", "cents": 3450}, id="call_0")


def refunding(request: RecordedRequest) -> ScriptedResponse:
    if not tool_answers(request):
        return tool_calls_response(REFUND)
    return text_response("Refunded 3450 cents on A-17.")


async def test_4_an_approval_sent_while_no_worker_runs_is_202_and_the_tool_runs_once(
    tmp_path: Path,
) -> None:
    async with web_stack(refunding, tmp_path) as stack:
        worker = await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url())
            await page.fill("#composer textarea", "Refund order A-17.")
            await page.click("#composer button[type=submit]")
            card = page.locator(".approval")
            await card.locator("button.approve").wait_for(timeout=DONE_GUARD_MS)
            assert await card.locator(".arguments").text_content() == REFUND.arguments_text
            await worker.kill()

            statuses: list[int] = []
            page.on(
                "response",
                lambda r: statuses.append(r.status) if "/approvals/" in r.url else None,
            )
            await card.locator("button.approve").dblclick()
            await (
                card.locator(".outcome")
                .filter(has_text="no worker")
                .wait_for(timeout=DONE_GUARD_MS)
            )
            while len(statuses) < 2:
                await page.wait_for_timeout(100)
            assert statuses == [202, 202]
            assert stack.refunds() == []  # nothing ran while no worker did

            await stack.start_worker()
            await page.wait_for_selector('#stop[data-reason="final_answer"]', timeout=DONE_GUARD_MS)
            decisions = await page.evaluate(
                "window.steadyloop.stream.applied.filter(a => a[1].type === 'decision')"
                ".map(a => a[1].decision)"
            )
            last_answer = await page.locator(".turn .answer").last.text_content()
        assert stack.refunds() == ["refund 3450 cents on A-17"]
        assert decisions == ["approved"]
        assert last_answer == "Refunded 3450 cents on A-17."


async def applied(page: Page) -> list[list[object]]:
    events = await page.evaluate("window.steadyloop.stream.applied")
    assert isinstance(events, list)
    return events


async def test_6_two_tabs_on_one_thread_see_one_sequence_and_one_tabs_approval_reaches_the_other(
    tmp_path: Path,
) -> None:
    async with web_stack(refunding, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            context = await browser.new_context()
            first = await context.new_page()
            await first.goto(stack.page_url())
            await first.fill("#composer textarea", "Refund order A-17.")
            await first.click("#composer button[type=submit]")
            await first.locator(".approval button.approve").wait_for(timeout=DONE_GUARD_MS)
            thread = parse_qs(urlsplit(first.url).query)["thread"][0]
            second = await context.new_page()
            await second.goto(stack.page_url(thread))
            await second.locator(".approval button.approve").wait_for(timeout=DONE_GUARD_MS)

            await first.click(".approval button.approve")
            await first.locator(".approval").wait_for(state="detached", timeout=DONE_GUARD_MS)
            # Both tabs read one log through the server's one subscription per run: the
            # decision the first tab applied is in the second within a second.
            await second.locator(".approval").wait_for(state="detached", timeout=1_000)

            for page in (first, second):
                await page.wait_for_selector('#stop[data-reason="final_answer"]')
            one, other = await applied(first), await applied(second)
            assert one == other
            assert [event["type"] for _, event in one] == [  # type: ignore[index]
                "tool_call",
                "approval_waiting",
                "decision",
                "tool_result",
                *["text_delta"] * (len(one) - 5),
                "stop",
            ]
        assert stack.refunds() == ["refund 3450 cents on A-17"]


def refunding_twice(request: RecordedRequest) -> ScriptedResponse:
    """Turn 1 asks `call_0` refund 100; once that is answered, turn 2 asks `call_0` again,
    for 999 (servers that number calls per turn reuse the id)."""
    answers = tool_answers(request)
    if not answers:
        return tool_calls_response(
            ScriptedCall("refund", {"order_id": "A-17", "cents": 100}, id="call_0")
        )
    if len(answers) == 1:
        return tool_calls_response(
            ScriptedCall("refund", {"order_id": "A-17", "cents": 999}, id="call_0")
        )
    return text_response("Nothing was refunded.")


async def test_5_an_approval_bound_to_turn_1s_call_0_is_409_naming_turn_2s_and_nothing_runs(
    tmp_path: Path,
) -> None:
    async with web_stack(refunding_twice, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            context = await browser.new_context()
            stale = await context.new_page()
            await stale.goto(stack.page_url())
            await stale.fill("#composer textarea", "Refund order A-17.")
            await stale.click("#composer button[type=submit]")
            await stale.locator(".approval button.approve").wait_for(timeout=DONE_GUARD_MS)
            thread = parse_qs(urlsplit(stale.url).query)["thread"][0]
            # This tab stops hearing of the run (a laptop lid closed): its card stays turn
            # 1's refund of 100.
            await stale.route("**/events*", lambda route: route.abort())
            await stale.evaluate("window.steadyloop.stream.close()")
            other = await context.new_page()
            await other.goto(stack.page_url(thread))
            await other.locator(".approval button.reject").click()
            turn_2 = other.locator(".approval", has_text="turn 2")
            await turn_2.wait_for(timeout=DONE_GUARD_MS)
            waiting_sha = await turn_2.get_attribute("data-sha")

            await stale.click(".approval button.approve")
            outcome = stale.locator(".approval .outcome")
            await outcome.filter(has_text="409").wait_for(timeout=DONE_GUARD_MS)
            refused = await outcome.text_content() or ""
            assert stack.refunds() == []

            await turn_2.locator("button.reject").click()
            await other.wait_for_selector(
                '#stop[data-reason="final_answer"]', timeout=DONE_GUARD_MS
            )
        assert "turn 2" in refused and waiting_sha is not None and waiting_sha[:12] in refused
        assert stack.refunds() == []


STEERED = "Also email Ana a prepaid return label."


async def test_7_a_second_message_in_flight_is_409_and_a_steer_lands_at_the_next_turn(
    tmp_path: Path,
) -> None:
    async with web_stack(refunding, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url())
            await page.fill("#composer textarea", "Refund order A-17.")
            await page.click("#composer button[type=submit]")
            await page.locator(".approval button.approve").wait_for(timeout=DONE_GUARD_MS)

            await page.fill("#composer textarea", STEERED)
            await page.click("#composer button[type=submit]")
            problem = page.locator("#problem")
            await problem.filter(has_text="409").wait_for(timeout=DONE_GUARD_MS)
            refused = await problem.text_content() or ""
            await page.check("#composer input[name=steer]")
            await page.click("#composer button[type=submit]")
            await page.locator(".said-note").wait_for(timeout=DONE_GUARD_MS)
            requests_before = len(stack.provider.requests)

            await page.click(".approval button.approve")
            await page.wait_for_selector('#stop[data-reason="final_answer"]', timeout=DONE_GUARD_MS)
        assert "409" in refused and "run" in refused
        # The message was not sent to the model while the call waited; the next request,
        # the turn after the refund's answer, carries it after that answer.
        assert requests_before == 1
        first, second = (r.json for r in stack.provider.requests)
        assert all(STEERED not in str(m.get("content")) for m in first["messages"])
        roles = [(m["role"], m.get("content")) for m in second["messages"]]
        tool_at = next(i for i, (role, _) in enumerate(roles) if role == "tool")
        assert ("user", STEERED) in roles[tool_at + 1 :], roles
        assert stack.refunds() == ["refund 3450 cents on A-17"]


async def test_8_another_tenant_gets_404_on_every_route_and_a_tenant_id_in_a_body_is_ignored(
    tmp_path: Path,
) -> None:
    async with web_stack(refunding, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with httpx.AsyncClient(base_url=stack.url, timeout=30) as http:
            own = stack.headers("tenant-a")
            made = await http.post("/v1/threads", json={}, headers=own)
            thread = made.json()["thread_id"]
            started = await http.post(
                f"/v1/threads/{thread}/runs",
                json={"prompt": "Refund order A-17.", "tenant_id": "tenant-b"},
                headers=own,
            )
            assert started.status_code == 201, started.text
            base = f"/v1/threads/{thread}"
            run = f"{base}/runs/1"
            sha = "0" * 64
            foreign = stack.headers("tenant-b")
            answers = {
                ("GET", base): await http.get(base, headers=foreign),
                ("POST", f"{base}/runs"): await http.post(
                    f"{base}/runs", json={"prompt": "mine now"}, headers=foreign
                ),
                ("GET", run): await http.get(run, headers=foreign),
                ("GET", f"{run}/events"): await http.get(f"{run}/events", headers=foreign),
                ("POST", f"{run}/approvals/call_0"): await http.post(
                    f"{run}/approvals/call_0",
                    json={"approve": True, "sha256": sha},
                    headers=foreign,
                ),
                ("POST", f"{run}/interrupt"): await http.post(
                    f"{run}/interrupt", json={}, headers=foreign
                ),
                ("POST", f"{run}/pause"): await http.post(f"{run}/pause", json={}, headers=foreign),
                ("POST", f"{run}/unpause"): await http.post(
                    f"{run}/unpause", json={}, headers=foreign
                ),
                ("POST", f"{run}/messages"): await http.post(
                    f"{run}/messages", json={"content": "hi"}, headers=foreign
                ),
                ("POST", f"{run}/receipts/k"): await http.post(
                    f"{run}/receipts/k", json={"resolution": {"kind": "give_up"}}, headers=foreign
                ),
            }
            statuses = {route: answer.status_code for route, answer in answers.items()}
            assert set(statuses.values()) == {404}, statuses
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url(thread, tenant="tenant-b"))
            await page.locator("#problem").filter(has_text="404").wait_for()
            assert await page.locator(".turn").count() == 0
        # The run is tenant-a's, as its token says, whatever the body claimed.
        history = await stack.client.get_workflow_handle(
            run_workflow("tenant-a", thread)
        ).fetch_history()
        started_with = history.events[0].workflow_execution_started_event_attributes.input
        (run_input,) = await stack.client.data_converter.decode(started_with.payloads, [RunInput])
        assert isinstance(run_input, RunInput) and run_input.tenant_id == "tenant-a"


LONG = [f"l{n}{'é→日🙂'[n % 4]} " for n in range(120)]


def streaming_long(request: RecordedRequest) -> ScriptedResponse:
    return paced_answer(LONG, 0.05)


async def test_10_following_across_the_logs_continue_as_new_shows_no_gap_and_no_repeat(
    tmp_path: Path,
) -> None:
    async with web_stack(streaming_long, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        # The smallest host history the options allow, and a batch per read: the host
        # continues-as-new while the page follows it.
        thread = await start_thread_run(
            stack,
            "long",
            "Write a long answer.",
            forwarding=ForwardingOptions(enabled=True, host_max_events=200, batch_interval_s=0.01),
        )
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url(thread))
            text = await shown(page)
            ids = await received(page)
        result = await result_of(stack, thread)
        host = await host_runs(stack, run_workflow("tenant-a", thread))
        assert host > 1, "the host never continued-as-new: the check did not happen"
        assert result.final_answer == "".join(LONG)
        assert text.encode("utf-8") == result.final_answer.encode("utf-8")
        assert [parse_cursor(i).offset for i in ids] == list(range(len(ids)))


def refunding_then_streaming(request: RecordedRequest) -> ScriptedResponse:
    if not tool_answers(request):
        return tool_calls_response(REFUND)
    return paced_answer(WORDS, 0.02)


async def test_10_following_across_an_idle_close_and_restart_shows_no_gap_and_no_repeat(
    tmp_path: Path,
) -> None:
    """The run waits for a person longer than its host stays open: the host closes when
    idle, the decision's publish starts it again with its log, and the page following
    all along reads on across both executions."""
    async with web_stack(refunding_then_streaming, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        thread = await start_thread_run(
            stack,
            "idle",
            "Refund order A-17.",
            forwarding=ForwardingOptions(enabled=True, host_idle_close_s=2),
        )
        run_id = run_workflow("tenant-a", thread)
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url(thread))
            approve = page.locator(".approval button.approve")
            await approve.wait_for(timeout=DONE_GUARD_MS)
            closed = await eventually(
                lambda: idle_closed_host(stack, run_id),
                timeout_s=60,
                what="an idle close",
                every_s=0.5,
            )
            assert closed.reason == "idle"
            await approve.click()
            await page.wait_for_selector('#stop[data-reason="final_answer"]', timeout=DONE_GUARD_MS)
            text = await page.locator(".turn .answer").last.text_content() or ""
            ids = await received(page)
            events = await applied(page)
        answer = await final_answer(stack, thread)
        assert await host_runs(stack, run_id) == 2, "the host was not started again"
        assert stack.refunds() == ["refund 3450 cents on A-17"]
        assert text.encode("utf-8") == answer.encode("utf-8") == ANSWER.encode("utf-8")
        # One pass over the log across both hosts: every cursor once, in order, none skipped.
        assert_strictly_increasing(ids)
        assert [parse_cursor(i).offset for i in ids] == list(range(len(ids)))
        # What the restarted host holds first (the decision, the tool's result) is shown
        # too: a host started again at offset 0 would lose it under the page's cursor.
        bodies = [body for _, body in events if isinstance(body, dict)]
        kinds = [body["type"] for body in bodies]
        assert kinds[:4] == ["tool_call", "approval_waiting", "decision", "tool_result"], kinds
        streamed = [str(body["text"]) for body in bodies if body["type"] == "text_delta"]
        assert "".join(streamed).encode("utf-8") == ANSWER.encode("utf-8")


async def idle_closed_host(stack: WebStack, run_workflow_id: str) -> OutputStreamSummary | None:
    """How the run's first host ended, once one has."""
    query = f'WorkflowId STARTS_WITH "{run_workflow_id}/output" AND ExecutionStatus = "Completed"'
    async for ended in stack.client.list_workflows(query):
        handle = stack.client.get_workflow_handle(
            ended.id, run_id=ended.run_id, result_type=OutputStreamSummary
        )
        summary = await handle.result(follow_runs=False)
        assert isinstance(summary, OutputStreamSummary)
        return summary
    return None


async def host_runs(stack: WebStack, run_workflow_id: str) -> int:
    """How many executions the run's output host had (1 + its continue-as-new count)."""
    query = f'WorkflowId STARTS_WITH "{run_workflow_id}/output"'
    return len([w async for w in stack.client.list_workflows(query)])


async def test_9_seven_tabs_on_one_run_neither_hang_nor_differ_and_the_seventh_can_approve(
    tmp_path: Path,
) -> None:
    async with web_stack(refunding, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            context = await browser.new_context()
            first = await context.new_page()
            await first.goto(stack.page_url())
            await first.fill("#composer textarea", "Refund order A-17.")
            await first.click("#composer button[type=submit]")
            await first.locator(".approval button.approve").wait_for(timeout=DONE_GUARD_MS)
            thread = parse_qs(urlsplit(first.url).query)["thread"][0]
            tabs = [first]
            for _ in range(6):
                tab = await context.new_page()
                await tab.goto(stack.page_url(thread))
                tabs.append(tab)
            # HTTP/1.1 gives one origin six connections: one stream per tab would leave
            # the seventh tab's stream, and its approval's POST, waiting forever.
            for tab in tabs:
                await tab.locator(".approval button.approve").wait_for(timeout=DONE_GUARD_MS)
            # One tab reads the stream and passes it on; the others are in step with it.
            leading = [await tab.evaluate("window.steadyloop.stream.leading") for tab in tabs]
            assert leading == [True] + [False] * 6
            async with tabs[6].expect_response(lambda r: "/approvals/" in r.url) as approval:
                await tabs[6].click(".approval button.approve")
            assert (await approval.value).status == 200
            for tab in tabs:
                await tab.wait_for_selector('#stop[data-reason="final_answer"]')
            sequences = [await applied(tab) for tab in tabs]
        assert all(sequence == sequences[0] for sequence in sequences)
        assert stack.refunds() == ["refund 3450 cents on A-17"]


THINKING = "The customer was charged once; check before charging again."
CHARGE = ScriptedCall("charge", {"order_id": "B-02", "cents": 2999}, id="call_a")


def charging_twice(request: RecordedRequest) -> ScriptedResponse:
    """Reasoning, then the same charge twice in one batch (the second is a replay)."""
    if not tool_answers(request):
        again = ScriptedCall(CHARGE.name, CHARGE.arguments, id="call_b")
        return sse_response(
            [
                *reasoning_chunks(THINKING),
                *tool_call_chunks([CHARGE, again]),
                finish_chunk("tool_calls"),
            ]
        )
    return text_response("Charged B-02 once.")


async def test_reasoning_streams_apart_from_the_answer_and_a_replayed_result_says_why(
    tmp_path: Path,
) -> None:
    async with web_stack(charging_twice, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(stack.page_url())
            await page.fill("#composer textarea", "Charge order B-02.")
            await page.click("#composer button[type=submit]")
            await page.wait_for_selector('#stop[data-reason="final_answer"]', timeout=DONE_GUARD_MS)
            reasoning = await page.locator(".turn .reasoning-text").first.text_content()
            answers = await page.locator(".turn .answer").all_text_contents()
            results = page.locator(".call .result")
            replayed = await results.nth(1).locator(".replayed").count()
            why = await results.nth(1).locator(".why").text_content()
            first_marked = await results.nth(0).locator(".replayed").count()
        charges = (stack.outbox / "charges.txt").read_text(encoding="utf-8").splitlines()
        assert charges == ["charge 2999 cents on B-02"]
        assert reasoning == THINKING
        assert THINKING not in "".join(answers) and answers[-1] == "Charged B-02 once."
        assert (first_marked, replayed) == (0, 1)
        assert why and "same call" in why, why


async def test_interrupt_mid_answer_stops_the_run_keeping_exactly_the_text_shown(
    tmp_path: Path,
) -> None:
    async with web_stack(streaming, tmp_path) as stack:
        await stack.start_worker()
        await stack.start_server()
        async with chromium() as browser:
            page = await browser.new_page()
            thread = await ask(page, stack, "Write forty words.")
            await page.click("#interrupt")
            await page.wait_for_selector('#stop[data-reason="interrupted"]', timeout=DONE_GUARD_MS)
            text = await page.locator(".turn .answer").text_content() or ""
            partial = await page.locator("#stop .partial").text_content()
            disabled = await page.is_disabled("#interrupt")
        result = await result_of(stack, thread)
        assert result.stop_reason == "interrupted" and result.partial is not None
        assert text == partial == result.partial.text
        assert WORDS[4] in text and ANSWER.startswith(text) and text != ANSWER
        assert disabled
