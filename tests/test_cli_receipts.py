"""`steadyloop receipts`: flags that fit together or are refused with exit 2, a table a
person can act on, key prefixes that never resolve the wrong call, and (slow) the whole
command path against a real run whose opaque call became ambiguous."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest
from loop_harness import Loop, assert_every_call_answered, run_input, running_loop, tool_messages
from steering_harness import shown as shown_by

from steadyloop._cli.main import build_parser, run_cli
from steadyloop._cli.outcome import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from steadyloop._cli.progress import arguments_text
from steadyloop._cli.receipts import (
    MIN_PREFIX,
    SHORT_KEY_LENGTH,
    KeyPrefixError,
    ReceiptsFailure,
    ReceiptsRequest,
    calls_json,
    describe_resolution,
    key_digest,
    list_lines,
    match_key,
    receipts_request,
    resolve,
    run_receipts,
    running_handle,
    short_key,
    table_lines,
)
from steadyloop._receipts.decision import receipt_key
from steadyloop._receipts.ledger import DidNotHappen, GiveUp, Happened
from steadyloop._run.models import AmbiguousCall
from steadyloop._worker.config import ConfigError
from steadyloop._worker.dev_server import free_port
from steadyloop.testing import (
    ScriptedCall,
    text_response,
    tool_calls_response,
)

RUN = "steadyloop-0d1e"
GUARD_S = 60  # how long a step may hang before the test gives up: a guard, not a measure


def request(*argv: str, stdin: str = "") -> ReceiptsRequest:
    return receipts_request(build_parser().parse_args(["receipts", *argv]), io.StringIO(stdin))


def ambiguous(
    tool: str = "send_email",
    arguments: dict[str, Any] | None = None,
    *,
    attempt: int = 1,
    reason: str = "attempt 1 of an opaque tool ended without an outcome",
) -> AmbiguousCall:
    args = {"to": "ana@example.com"} if arguments is None else arguments
    return AmbiguousCall(
        key=receipt_key("default", RUN, tool, args).text,
        tool=tool,
        arguments=args,
        attempt=attempt,
        reason=reason,
        call_ids=["c1"],
    )


# -- flags ------------------------------------------------------------------------------


def test_the_id_alone_lists() -> None:
    assert request(RUN) == ReceiptsRequest(RUN)
    assert request(RUN, "--json") == ReceiptsRequest(RUN, as_json=True)


@pytest.mark.parametrize(
    ("flags", "resolution"),
    [
        (["--happened", "sent: id 42"], Happened(result="sent: id 42")),
        (["--did-not-happen"], DidNotHappen()),
        (["--give-up"], GiveUp(note=None)),
        (["--give-up", "checked the outbox by hand"], GiveUp(note="checked the outbox by hand")),
        (["--give-up", "  "], GiveUp(note=None)),
    ],
)
def test_each_resolution_flag(flags: list[str], resolution: Any) -> None:
    parsed = request(RUN, "--resolve", "9c1f03", *flags)
    assert parsed == ReceiptsRequest(RUN, resolve="9c1f03", resolution=resolution)


def test_happened_dash_reads_the_result_from_standard_input() -> None:
    parsed = request(RUN, "--resolve", "9c1f03", "--happened", "-", stdin="line one\nline two\r\n")
    assert parsed.resolution == Happened(result="line one\nline two")


def test_the_id_may_follow_the_flags() -> None:
    assert request("--resolve", "9c1f", "--did-not-happen", RUN).workflow_id == RUN


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--did-not-happen"], "--resolve KEY"),
        (["--give-up", "x"], "--resolve KEY"),
        (["--resolve", "9c1f"], "needs what happened"),
        (["--resolve", " ", "--did-not-happen"], "blank"),
        (["--resolve", "9c1f", "--happened", " \n"], "--happened needs the result"),
        (["--resolve", "9c1f", "--happened", "-"], "--happened needs the result"),  # empty stdin
        (["--resolve", "9c1f", "--did-not-happen", "--json"], "--json"),
    ],
)
def test_flags_that_do_not_fit_together_are_refused(flags: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("-", r"\-")):
        request(RUN, *flags)


def test_a_mistaken_command_line_is_refused_before_standard_input_is_read() -> None:
    class Unreadable(io.StringIO):
        def read(self, size: int | None = -1) -> str:
            raise AssertionError("standard input was read")

    args = build_parser().parse_args(["receipts", RUN, "--happened", "-"])
    with pytest.raises(ConfigError, match="--resolve KEY"):
        receipts_request(args, Unreadable())


def test_two_resolutions_at_once_are_an_argparse_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(
            ["receipts", RUN, "--resolve", "9c1f", "--did-not-happen", "--happened", "x"]
        )
    assert exited.value.code == EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def test_usage_errors_exit_2_before_any_connection(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there: a connection attempt would exit 1
    code = run_cli(["receipts", RUN, "--did-not-happen", "--address", f"127.0.0.1:{port}"])
    assert code == EXIT_USAGE
    assert "steadyloop: --happened, --did-not-happen and --give-up need" in capsys.readouterr().err


def test_an_unreachable_temporal_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    assert run_cli(["receipts", RUN, "--address", f"127.0.0.1:{port}"]) == EXIT_FAILED
    assert f"cannot reach Temporal at 127.0.0.1:{port}" in capsys.readouterr().err


# -- what is printed --------------------------------------------------------------------


def test_the_short_key_is_a_prefix_of_the_full_keys_digest() -> None:
    call = ambiguous()
    assert len(short_key(call.key)) == SHORT_KEY_LENGTH
    assert key_digest(call.key).startswith(short_key(call.key))
    assert short_key(call.key) != short_key(ambiguous("other_tool").key)


def test_the_table_aligns_its_columns_and_keeps_the_reason_whole() -> None:
    calls = [
        ambiguous("send_email", {"to": "ana@example.com", "subject": "Invoice"}),
        ambiguous("pay", {"amount": 12.5}, attempt=3, reason="attempt 3 of pay: lease expired"),
    ]
    header, first, second = table_lines(calls)
    assert header.split() == ["KEY", "TOOL", "ARGUMENTS", "ATTEMPT", "REASON"]
    assert first.split("  ")[0] == short_key(calls[0].key)
    for column in ("TOOL", "ARGUMENTS", "ATTEMPT", "REASON"):
        assert first[header.index(column) - 2 : header.index(column)] == "  "
    tool_at, attempt_at = header.index("TOOL"), header.index("ATTEMPT")
    assert second[tool_at:].startswith("pay ")
    assert second[attempt_at:].startswith("3 ")
    assert first.endswith("attempt 1 of an opaque tool ended without an outcome")
    assert second.endswith("attempt 3 of pay: lease expired")
    assert '{"to":"ana@example.com","subject":"Invoice"}' in first


def test_on_a_terminal_the_reason_is_cut_to_its_width() -> None:
    calls = [ambiguous(reason="why " * 100)]
    wide = table_lines(calls)
    assert len(wide[1]) > 160 and wide[1].endswith("...")
    narrow = table_lines(calls, width=100)
    assert max(len(line) for line in narrow) == 99
    assert narrow[1].endswith("...")
    header, row = table_lines(calls, width=10)  # too narrow: some of the reason is kept
    assert len(row[header.index("REASON") :]) == 20


def test_long_or_multiline_arguments_stay_on_one_cut_line() -> None:
    text = arguments_text({"body": "Dear Ana,\n\n" + "x" * 200, "to": "ana@example.com"})
    assert "\n" not in text and len(text) == 48 and text.endswith("...")
    assert arguments_text({"city": "Zürich"}) == '{"city":"Zürich"}'
    assert arguments_text({}) == "{}"


def test_the_listing_says_how_to_resolve_and_none_open_is_said_plainly() -> None:
    assert list_lines(RUN, []) == [f"run {RUN}: no open ambiguous calls"]
    lines = list_lines(RUN, [ambiguous()])
    assert lines[0].startswith(f"run {RUN}: 1 open ambiguous call,")
    assert f"  steadyloop receipts {RUN} --resolve KEY --happened RESULT" in lines
    assert f"  steadyloop receipts {RUN} --resolve KEY --did-not-happen" in lines
    assert f"  steadyloop receipts {RUN} --resolve KEY --give-up [NOTE]" in lines
    assert list_lines(RUN, [ambiguous(), ambiguous("pay")])[0].startswith(
        f"run {RUN}: 2 open ambiguous calls,"
    )


def test_json_carries_every_field_and_the_full_key() -> None:
    call = ambiguous()
    (entry,) = json.loads(calls_json([call]))
    assert entry == {"short_key": short_key(call.key), **call.model_dump(mode="json")}
    assert json.loads(calls_json([])) == []


def test_each_resolution_is_described() -> None:
    assert "'sent: id 42'" in describe_resolution(Happened(result="sent: id 42"))
    assert "run it again" in describe_resolution(DidNotHappen())
    assert describe_resolution(GiveUp()).endswith("abandoned")
    assert "'by hand'" in describe_resolution(GiveUp(note="by hand"))


# -- matching KEY ---------------------------------------------------------------------


def two_calls_sharing_a_prefix(length: int) -> tuple[AmbiguousCall, AmbiguousCall]:
    """Two calls whose digests start alike (found by search: deterministic, and quick)."""
    seen: dict[str, AmbiguousCall] = {}
    for n in itertools.count():
        call = ambiguous(arguments={"n": n})
        prefix = key_digest(call.key)[:length]
        if prefix in seen:
            return seen[prefix], call
        seen[prefix] = call
    raise AssertionError("unreachable")


def test_a_unique_prefix_or_the_full_key_names_one_call() -> None:
    email, pay = ambiguous(), ambiguous("pay", {"amount": 1})
    calls = [email, pay]
    assert match_key(calls, short_key(pay.key), RUN) == pay
    assert match_key(calls, key_digest(pay.key)[:MIN_PREFIX].upper(), RUN) == pay
    assert match_key(calls, key_digest(email.key), RUN) == email
    assert match_key(calls, email.key, RUN) == email


def test_a_prefix_shared_by_two_calls_is_refused_and_both_are_named() -> None:
    first, second = two_calls_sharing_a_prefix(MIN_PREFIX)
    shared = key_digest(first.key)[:MIN_PREFIX]
    with pytest.raises(KeyPrefixError, match="matches 2 calls") as refused:
        match_key([first, second], shared, RUN)
    assert short_key(first.key) in str(refused.value)
    assert short_key(second.key) in str(refused.value)
    assert match_key([first, second], short_key(second.key), RUN) == second


def test_an_unknown_or_too_short_prefix_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    call = ambiguous()
    digest = key_digest(call.key)
    other = next(c for c in "0123456789abcdef" if c != digest[0])
    with pytest.raises(KeyPrefixError, match="no open ambiguous call") as unknown:
        match_key([call], other * MIN_PREFIX, RUN)
    assert short_key(call.key) in str(unknown.value)  # says what is open
    with pytest.raises(KeyPrefixError, match="too short"):
        match_key([call], digest[: MIN_PREFIX - 1], RUN)
    with pytest.raises(KeyPrefixError, match="no open ambiguous calls"):
        match_key([], digest, RUN)
    assert issubclass(KeyPrefixError, ConfigError)  # so `run_cli` exits 2


# -- against a real run -----------------------------------------------------------------


async def receipts(loop: Loop, *argv: str) -> tuple[int, str]:
    """`steadyloop receipts ARGV` through the command's own path, on the test's client."""
    out = io.StringIO()
    code = await run_receipts(loop.client, request(*argv), out)
    return code, out.getvalue()


async def open_listing(loop: Loop, workflow_id: str) -> str:
    """The listing once a call is open (the lease runs out in real time: no result awaited)."""
    give_up_at = asyncio.get_running_loop().time() + GUARD_S
    while asyncio.get_running_loop().time() < give_up_at:
        code, out = await receipts(loop, workflow_id)
        assert code == EXIT_OK
        if "no open ambiguous calls" not in out:
            return out
        await asyncio.sleep(0.05)
    raise AssertionError("no call became ambiguous")


def key_column(listing: Sequence[str]) -> list[str]:
    header = next(i for i, line in enumerate(listing) if line.startswith("KEY "))
    rows = itertools.takewhile(bool, listing[header + 1 :])
    return [row.split()[0] for row in rows]


@pytest.mark.slow
async def test_list_then_resolve_lets_the_run_finish_with_each_effect_once() -> None:
    # Each slow_note attempt times out with its outcome unknown (it finishes in the
    # background); once its lease has expired the call is ambiguous, and the run waits
    # for a person. The model asks for both calls in two turns.
    pay, other = ({"text": "pay invoice"}, {"text": "file receipt"})
    script = [
        tool_calls_response(
            ScriptedCall("slow_note", pay, id="s1"), ScriptedCall("slow_note", other, id="o1")
        ),
        tool_calls_response(
            ScriptedCall("slow_note", pay, id="s2"), ScriptedCall("slow_note", other, id="o2")
        ),
        text_response("The invoice is paid."),
    ]
    async with running_loop(script) as loop:
        with pytest.raises(ConfigError, match="no workflow 'no-such-run'"):
            await receipts(loop, "no-such-run")
        handle = await loop.start(run_input())
        listing = (await open_listing(loop, handle.id)).splitlines()
        code, as_json = await receipts(loop, handle.id, "--json")
        entries = {e["arguments"]["text"]: e for e in json.loads(as_json)}
        assert code == EXIT_OK and sorted(key_column(listing)) == sorted(
            e["short_key"] for e in entries.values()
        )
        pay_key, other_key = (
            entries["pay invoice"]["short_key"],
            entries["file receipt"]["short_key"],
        )
        pay_ids, other_ids = (
            entries["pay invoice"]["call_ids"],
            entries["file receipt"]["call_ids"],
        )
        assert len(pay_ids) == len(other_ids) == 1
        assert {*pay_ids, *other_ids} <= {"s1", "s2", "o1", "o2"}
        row = next(line for line in listing if line.startswith(pay_key))
        assert row.split()[1:5] == ["slow_note", '{"text":"pay', 'invoice"}', "1"]
        assert "opaque" in row

        with pytest.raises(KeyPrefixError, match="no open ambiguous call"):
            await receipts(loop, handle.id, "--resolve", "zzzzzz", "--did-not-happen")
        bogus = AmbiguousCall.model_validate({**entries["pay invoice"], "key": "not-open"})
        with pytest.raises(ReceiptsFailure, match="the run refused to resolve"):
            await resolve(
                loop.client, await running_handle(loop.client, handle.id), bogus, DidNotHappen()
            )

        code, resolved = await receipts(
            loop, handle.id, "--resolve", pay_key[:6], "--happened", "noted 'pay invoice'"
        )
        assert code == EXIT_OK
        assert resolved.startswith(f"resolved {pay_key} (slow_note")
        assert "the workflow answered: happened" in resolved
        assert f"1 more call waits for a person: `steadyloop receipts {handle.id}`" in resolved
        code, listing_after = await receipts(loop, handle.id)
        assert key_column(listing_after.splitlines()) == [other_key]
        code, given_up = await receipts(
            loop, handle.id, "--resolve", other_key, "--give-up", "filed by hand"
        )
        assert code == EXIT_OK and "the workflow answered: give_up" in given_up
        assert f"the run goes on; follow it with `steadyloop show {handle.id}`" in given_up

        result = await asyncio.wait_for(handle.result(), GUARD_S)
        for _ in range(100):  # the first attempts' coroutines outlive their timeout
            if len(loop.effects.notes) >= 2:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        notes, started = sorted(loop.effects.notes), loop.effects.started["slow_note"]
        with pytest.raises(ReceiptsFailure, match="has ended"):
            await receipts(loop, handle.id)
        shown = await shown_by(loop.client, handle)
    assert (result.stop_reason, result.final_answer) == ("final_answer", "The invoice is paid.")
    assert notes == ["file receipt", "pay invoice"] and started == 2  # each exactly once
    assert_every_call_answered(result.transcript)
    # The suspended call is answered by the resolution; the other ask of the same call
    # is the attempt that timed out (before it) or a replay of the resolution (after).
    answers = {m.tool_call_id or "": m.content or "" for m in tool_messages(result.transcript)}
    assert answers[pay_ids[0]] == "noted 'pay invoice'"
    assert "abandoned" in answers[other_ids[0]] and "filed by hand" in answers[other_ids[0]]
    for call_id, answer in answers.items():
        resolved_as = answers[pay_ids[0] if call_id.startswith("s") else other_ids[0]]
        assert "timed out" in answer or answer == resolved_as, (call_id, answer)
    # `show` of the ended run: the give-up reads as a give-up, with the person's note,
    # never as a replayed receipt; a resolution as done reads as a person's.
    given = next((line for line in shown if "given up" in line), str(shown))
    assert "(given up by a person after attempt 1, not run: filed by hand" in given, shown
    assert not any("receipt already complete" in line for line in shown), shown
    assert any("a person resolved an earlier attempt as done" in line for line in shown), shown
