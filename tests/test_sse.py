"""`SSEDecoder` against the WHATWG event-stream rules, fed whole, byte by byte and split.

Every case is run through three feeders (one read, one byte per read, and reads cut at
random points by hypothesis), because the bugs that matter live at read boundaries. A
line-by-line reference written straight from the spec checks arbitrary streams, so the
fast path for `data: {...}\\n\\n` cannot drift from the general interpreter.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop._stream.sse import MessageData, ServerSentEvent, SSEDecoder

Event = tuple[str, str, str | None, int | None]


def as_tuples(events: list[ServerSentEvent]) -> list[Event]:
    return [(e.data, e.event, e.id, e.retry) for e in events]


def feed_reads(
    reads: list[bytes], *, data_only: bool = False
) -> tuple[list[ServerSentEvent], SSEDecoder]:
    """Decode `reads` with `feed`, or with `feed_data` (its strings read as plain events)."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for read in reads:
        if data_only:
            items = decoder.feed_data(read)
            events.extend(ServerSentEvent(i) if isinstance(i, str) else i for i in items)
        else:
            events.extend(decoder.feed(read))
    events.extend(decoder.flush())
    return events, decoder


def whole(body: bytes) -> list[bytes]:
    return [body]


def bytewise(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


def random_cuts(seed: int) -> Callable[[bytes], list[bytes]]:
    def cut(body: bytes) -> list[bytes]:
        rng = random.Random(seed)
        points = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 8))))
        return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]

    return cut


FEEDERS = [whole, bytewise, *(random_cuts(seed) for seed in range(6))]


def decode_all(body: bytes) -> list[tuple[list[Event], SSEDecoder]]:
    """Every feeder, through both `feed` and `feed_data`."""
    out = []
    for data_only in (False, True):
        for feeder in FEEDERS:
            events, decoder = feed_reads(feeder(body), data_only=data_only)
            out.append((as_tuples(events), decoder))
    return out


def assert_events(body: bytes, expected: Sequence[Event]) -> SSEDecoder:
    decoded = decode_all(body)
    for events, _ in decoded:
        assert events == list(expected)
    return decoded[0][1]


# -- the spec's own examples (9.2.6) -------------------------------------------------------------


def test_spec_multiline_data_is_joined_with_newlines() -> None:
    assert_events(b"data: YHOO\ndata: +2\ndata: 10\n\n", [("YHOO\n+2\n10", "message", None, None)])


def test_spec_comment_ids_and_one_leading_space() -> None:
    body = (
        b": test stream\n\ndata: first event\nid: 1\n\n"
        b"data:second event\nid\n\ndata:  third event\n\n"
    )
    decoder = assert_events(
        body,
        [
            ("first event", "message", "1", None),
            ("second event", "message", "", None),  # `id` with no value resets it to ""
            (" third event", "message", "", None),  # only one space is stripped
        ],
    )
    assert decoder.comments == 1


def test_spec_third_block_needs_its_blank_line() -> None:
    body = b"data: first event\nid: 1\n\ndata:  third event\n"
    for events, decoder in decode_all(body):
        assert events == [("first event", "message", "1", None)]
        assert decoder.incomplete_tail


def test_spec_empty_data_and_a_lone_newline() -> None:
    for events, decoder in decode_all(b"data\n\ndata\ndata\n\ndata:"):
        assert events == [("", "message", None, None), ("\n", "message", None, None)]
        assert decoder.incomplete_tail  # the last block is discarded


def test_spec_space_after_colon_is_optional() -> None:
    assert_events(
        b"data:test\n\ndata: test\n\n",
        [("test", "message", None, None), ("test", "message", None, None)],
    )


# -- line ends -------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_end_is_one_line_end(end: bytes) -> None:
    body = b"data: a" + end + b"data: b" + end + end + b"event: e" + end + b"data: c" + end + end
    assert_events(body, [("a\nb", "message", None, None), ("c", "e", None, None)])


def test_mixed_line_ends_in_one_stream() -> None:
    body = b"event: e\r\nid: 1\rdata: one\ndata: two\r\n\r\n: c\rdata: three\n\n"
    assert_events(body, [("one\ntwo", "e", "1", None), ("three", "message", "1", None)])


def test_cr_ending_one_read_and_lf_starting_the_next_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # Read as two line ends, the LF would be a blank line dispatching "a" alone.
    events = decoder.feed(b"\ndata: b\r\n\r\n")
    assert as_tuples(events) == [("a\nb", "message", None, None)]


def test_a_lone_cr_then_a_cr_in_the_next_read_is_a_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert as_tuples(decoder.feed(b"\r")) == [("a", "message", None, None)]


# -- UTF-8 ---------------------------------------------------------------------------------------


def test_multibyte_characters_split_across_reads() -> None:
    text = "caf\u00e9 \u6771\u4eac \U0001f642"
    body = f'data: {text}\n\ndata: {{"c":"{text}"}}\n\n'.encode()
    for cut in range(1, len(body)):
        events, _ = feed_reads([body[:cut], body[cut:]])
        assert [e.data for e in events] == [text, f'{{"c":"{text}"}}'], cut
    assert_events(
        body, [(text, "message", None, None), (f'{{"c":"{text}"}}', "message", None, None)]
    )


def test_invalid_utf8_becomes_replacement_characters() -> None:
    body = b"data: a\xffb\n\ndata: \xe2\x82\n\n"
    assert_events(body, [("a\ufffdb", "message", None, None), ("\ufffd", "message", None, None)])


def test_bom_at_stream_start_is_stripped_even_when_split() -> None:
    body = b"\xef\xbb\xbfdata: a\n\n"
    assert_events(body, [("a", "message", None, None)])


def test_only_the_first_bom_is_stripped() -> None:
    # A second BOM makes the field name "\ufeffdata", an unknown field.
    assert_events(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n", [("b", "message", None, None)])
    assert_events(b"data: a\n\n\xef\xbb\xbfdata: b\n\n", [("a", "message", None, None)])


# -- fields ---------------------------------------------------------------------------------------


def test_event_type_applies_to_its_event_only() -> None:
    assert_events(
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\ndata: plain\n\n",
        [
            ("73857293", "add", None, None),
            ("2153", "remove", None, None),
            ("plain", "message", None, None),
        ],
    )


def test_block_without_data_is_not_dispatched_and_its_type_does_not_leak() -> None:
    decoder = assert_events(b"event: ignored\nid: 3\n\ndata: x\n\n", [("x", "message", "3", None)])
    assert decoder.events == 1


def test_empty_event_type_means_message() -> None:
    assert_events(
        b"event\ndata: x\n\nevent:\ndata: y\n\n",
        [("x", "message", None, None), ("y", "message", None, None)],
    )


def test_last_event_id_is_sticky() -> None:
    assert_events(
        b"id: 7\ndata: a\n\ndata: b\n\n",
        [("a", "message", "7", None), ("b", "message", "7", None)],
    )


def test_an_id_containing_nul_is_ignored() -> None:
    decoder = assert_events(
        b"id: 5\ndata: a\n\nid: 6\x00\ndata: b\n\n",
        [("a", "message", "5", None), ("b", "message", "5", None)],
    )
    assert decoder.last_event_id == "5"


def test_retry_takes_ascii_digits_only() -> None:
    body = (
        "retry: 5000\ndata: a\n\n"
        "retry: 1a\nretry: -1\nretry:\nretry: \u00b2\nretry: \u0661\ndata: b\n\n"
        "retry: 250\n\n"
    ).encode()
    decoder = assert_events(body, [("a", "message", None, 5000), ("b", "message", None, None)])
    assert decoder.retry == 250  # set by a block that dispatched nothing


def test_field_without_colon_and_unknown_fields() -> None:
    assert_events(
        b"data\ndata: x\n\nfoo: bar\nfoo\ndata:y\n\n",
        [("\nx", "message", None, None), ("y", "message", None, None)],
    )


def test_colons_inside_a_value_are_kept() -> None:
    assert_events(b"data: a: b:c\n\n", [("a: b:c", "message", None, None)])


def test_a_field_name_is_case_sensitive_and_needs_no_space_before_colon() -> None:
    assert_events(b"Data: x\ndata : y\ndata: z\n\n", [("z", "message", None, None)])


def test_blank_lines_between_events_dispatch_nothing() -> None:
    decoder = assert_events(
        b"\n\n\ndata: a\n\n\n\n\ndata: b\n\n\n",
        [("a", "message", None, None), ("b", "message", None, None)],
    )
    assert decoder.events == 2


def test_comments_are_ignored_and_counted() -> None:
    body = b": keep-alive\n\n:\ndata: a\n: inside\n\n: tail\n"
    for events, decoder in decode_all(body):
        assert events == [("a", "message", None, None)]
        assert decoder.comments == 4
        assert not decoder.incomplete_tail  # only a comment was left over


# -- end of stream --------------------------------------------------------------------------------


def test_flush_classifies_the_tail() -> None:
    cases = {
        b"data: a\n\n": False,
        b"data: a\n\n\n\n": False,
        b"data: a\n\n: ping\n": False,
        b"data: a\n\ndata: b\n": True,
        b"data: a\n\ndata: b": True,
        b"data: a\n\nda": True,
        b"data: a\n\nid: 9\n": True,
    }
    for body, incomplete in cases.items():
        for events, decoder in decode_all(body):
            assert events == [("a", "message", None, None)], body
            assert decoder.incomplete_tail is incomplete, body


def test_flush_applies_complete_id_and_retry_lines_of_the_tail() -> None:
    events, decoder = feed_reads([b"data: a\n\nid: 9\nretry: 30\ndata: lost"])
    assert [e.data for e in events] == ["a"]
    assert decoder.last_event_id == "9"
    assert decoder.retry == 30
    assert decoder.discarded_tail == "id: 9\nretry: 30\ndata: lost"


def test_flush_can_dispatch_an_unterminated_event_when_asked() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\nevent: e\ndata: c\ndata: partial") != []
    events = decoder.flush(dispatch_incomplete=True)
    assert as_tuples(events) == [("b\nc", "e", None, None)]
    assert decoder.discarded_tail == "data: partial"
    assert decoder.incomplete_tail
    assert decoder.events == 2


def test_flush_is_idempotent_and_feed_after_flush_refuses() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: a\n")
    assert decoder.flush() == []
    assert decoder.flush() == []
    with pytest.raises(ValueError):
        decoder.feed(b"\n")


def test_counters() -> None:
    body = b"data: a\n\n: c\n\ndata: b\n\ndata: [DONE]\n\n"
    for events, decoder in decode_all(body):
        assert len(events) == 3
        assert decoder.events == 3
        assert decoder.bytes_fed == len(body)
        assert decoder.comments == 1


def test_feed_data_gives_strings_only_for_plain_message_events() -> None:
    decoder = SSEDecoder()
    assert decoder.feed_data(b"data: a\n\ndata: b\n\n") == ["a", "b"]
    events = decoder.feed_data(b"id: 1\ndata: c\n\n")
    assert [(e.data, e.id) for e in events if isinstance(e, ServerSentEvent)] == [("c", "1")]
    # The id is sticky: later events are not plain any more.
    assert all(isinstance(e, ServerSentEvent) for e in decoder.feed_data(b"data: d\n\n"))
    assert SSEDecoder().feed_data(b"") == []


def test_message_data_is_the_data_strings_kept_as_bytes() -> None:
    decoder = SSEDecoder()
    items = decoder.feed_data("data: a\n\ndata: \u00e9\n\ndata: b\n\n".encode())
    assert isinstance(items, MessageData)
    assert items.raw == [b"a", "\u00e9".encode(), b"b"]
    assert len(items) == 3
    assert items[1] == "\u00e9"
    assert items[-1] == "b"
    assert items[0:2] == ["a", "\u00e9"]
    assert list(items) == ["a", "\u00e9", "b"]
    assert items == ["a", "\u00e9", "b"]
    assert items == MessageData([b"a", "\u00e9".encode(), b"b"])
    assert items != ["a", "b"]
    assert items != "a\u00e9b"
    with pytest.raises(IndexError):
        items[3]


def test_message_data_decodes_invalid_utf8_as_replacement_characters() -> None:
    # Also split across reads: nothing is decoded before the event is complete.
    decoder = SSEDecoder()
    assert decoder.feed_data(b"data: x\xe2\x82") == []
    items = decoder.feed_data(b"\xac\xff\n\n")
    assert list(items) == ["x\u20ac\ufffd"]
    assert items[0] == "x\u20ac\ufffd"


def test_bytearray_and_memoryview_reads() -> None:
    decoder = SSEDecoder()
    body = "data: caf\u00e9\n\ndata: x\n\n".encode()
    events = decoder.feed(bytearray(body[:9])) + decoder.feed(memoryview(body[9:]))  # type: ignore[arg-type]
    assert [e.data for e in events] == ["caf\u00e9", "x"]


def test_empty_reads_are_harmless() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"data: a") == []
    assert decoder.feed(b"") == []
    assert [e.data for e in decoder.feed(b"\n\n")] == ["a"]


def test_large_event_spread_over_many_reads() -> None:
    payload = "x" * 200_000
    body = f"data: {payload}\ndata: y\n\n".encode()
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for i in range(0, len(body), 1000):
        events.extend(decoder.feed(body[i : i + 1000]))
    assert [e.data for e in events] == [payload + "\ny"]


def test_fast_path_shape_and_general_shape_agree() -> None:
    # The same events, once in the shape the fast path takes and once with a comment
    # and CRLF forcing the general interpreter.
    payloads = ['{"a":1}', "", " lead", "caf\u00e9 \U0001f642", "[DONE]"]
    fast = b"".join(f"data: {p}\n\n".encode() for p in payloads)
    general = b": hi\r\n" + b"".join(f"data: {p}\r\n\r\n".encode() for p in payloads)
    expected = [(p, "message", None, None) for p in payloads]
    assert_events(fast, expected)
    assert_events(general, expected)


# -- against a reference written from the spec ---------------------------------------------------


def reference(body: bytes) -> tuple[list[Event], str | None, int | None, bool]:
    """The spec's algorithm, line by line, on the whole decoded stream."""
    text = body.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    pieces = re.split(r"(\r\n|\r|\n)", text)
    lines = pieces[0::2]
    complete = lines[:-1]  # the last piece has no line end
    events: list[Event] = []
    data: list[str] = []
    event_type = ""
    last_id: str | None = None
    retry: int | None = None
    event_retry: int | None = None
    since_dispatch: list[str] = []
    for line in complete:
        if line == "":
            if data:
                events.append(("\n".join(data), event_type or "message", last_id, event_retry))
            data, event_type, event_retry, since_dispatch = [], "", None, []
            continue
        since_dispatch.append(line)
        if line.startswith(":"):
            continue
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event_type = value
        elif field == "id" and "\0" not in value:
            last_id = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            retry = event_retry = int(value)
    leftover = [*since_dispatch, lines[-1]]
    incomplete = any(line and not line.startswith(":") for line in leftover)
    return events, last_id, retry, incomplete


LINES = st.sampled_from(
    [
        'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"hi"}}]}',
        "data: caf\u00e9 \U0001f642",
        "data:x",
        "data",
        "data:",
        "data:  two spaces",
        "data: [DONE]",
        ": keep-alive",
        ":",
        "event: delta",
        "event",
        "id: 7",
        "id",
        "id: a\0b",
        "retry: 1500",
        "retry: 15x",
        "foo: bar",
        "",
        "",
        "",
    ]
)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    ends = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r"])
    parts: list[str] = []
    if draw(st.booleans()):
        parts.append("\ufeff")
    for line in draw(st.lists(LINES, max_size=30)):
        parts.append(line + draw(ends))
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["data: trunc", "da", "id: 8", ": c"])))
    body = "".join(parts).encode()
    if draw(st.booleans()):
        junk = draw(st.sampled_from([b"\xff", b"\xe2\x82", b"\xf0\x9f"]))
        at = draw(st.integers(0, len(body)))
        body = body[:at] + junk + body[at:]
    return body


@st.composite
def fast_shaped_streams(draw: st.DrawFn) -> bytes:
    """Mostly `data: {...}\\n\\n`, the fast path's shape, with the odd other line."""
    blocks: list[str] = []
    for _ in range(draw(st.integers(0, 40))):
        payload = draw(
            st.sampled_from(['{"a":1}', "x y", "", "\u6771\u4eac", "\U0001f642", "[DONE]"])
        )
        blocks.append(f"data: {payload}\n\n")
        if draw(st.integers(0, 9)) == 0:
            blocks.append(draw(st.sampled_from([": ping\n\n", "id: 1\n", "event: e\n", "\n"])))
    return "".join(blocks).encode()


def check_against_reference(body: bytes, cuts: list[int]) -> None:
    points = sorted({c % (len(body) + 1) for c in cuts})
    reads = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    expected, last_id, retry, incomplete = reference(body)
    for data_only in (False, True):
        events, decoder = feed_reads(reads, data_only=data_only)
        assert as_tuples(events) == expected
        assert decoder.last_event_id == last_id
        assert decoder.retry == retry
        assert decoder.incomplete_tail is incomplete
        assert decoder.events == len(expected)
        assert decoder.bytes_fed == len(body)


@settings(max_examples=400, deadline=None)
@given(streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_matches_the_spec_reference_at_any_split(body: bytes, cuts: list[int]) -> None:
    check_against_reference(body, cuts)


@settings(max_examples=300, deadline=None)
@given(fast_shaped_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_fast_path_matches_the_spec_reference_at_any_split(body: bytes, cuts: list[int]) -> None:
    check_against_reference(body, cuts)


@settings(max_examples=100, deadline=None)
@given(streams())
def test_matches_the_spec_reference_byte_by_byte(body: bytes) -> None:
    check_against_reference(body, list(range(len(body))))


# -- `event_names=False`: named events handed over as data (the Responses and Anthropic wires) --


def feed_named(reads: list[bytes]) -> tuple[list[Event], SSEDecoder]:
    """Decode with `SSEDecoder(event_names=False).feed_data`, each item as an event tuple:
    a plain payload (its event name not kept) as `(data, None, None, None)`."""
    decoder = SSEDecoder(event_names=False)
    events: list[Event] = []
    for read in reads:
        items = decoder.feed_data(read)
        if items.__class__ is MessageData:
            events.extend((data, None, None, None) for data in items)  # type: ignore[misc]
        else:
            events.extend(as_tuples(items))  # type: ignore[arg-type]
    events.extend(as_tuples(decoder.flush()))
    return events, decoder


def check_named_against_reference(body: bytes, reads: list[bytes]) -> None:
    """What the spec dispatches, with the name dropped only where the decoder may drop
    it: never for an event named `error`, never for an event with an id or retry."""
    expected, last_id, retry, incomplete = reference(body)
    events, decoder = feed_named(reads)
    assert len(events) == len(expected)
    for got, want in zip(events, expected, strict=True):
        if got[1] is None:
            assert got[0] == want[0]
            assert want[1] != "error" and want[2] is None and want[3] is None
        else:
            assert got == want
    assert decoder.last_event_id == last_id
    assert decoder.retry == retry
    assert decoder.incomplete_tail is incomplete
    assert decoder.events == len(expected)
    assert decoder.bytes_fed == len(body)


NAMED_SAMPLE = (
    b'event: response.created\ndata: {"type":"response.created","n":0}\n\n'
    b"event: response.output_text.delta\n"
    b'data: {"type":"d","delta":"caf\xc3\xa9 \xf0\x9f\x99\x82"}\n\n'
    b'event: ping\ndata: {"type":"ping"}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","x":"a:b"}\n\n'
    b'event: e\ndata: {"type":"e","n":5}\n\n'
)


@pytest.mark.parametrize(
    "body",
    [
        NAMED_SAMPLE,
        b"\xef\xbb\xbf" + NAMED_SAMPLE,
        NAMED_SAMPLE.replace(b"\n", b"\r\n"),
        NAMED_SAMPLE.replace(b"\n", b"\r"),
        NAMED_SAMPLE.replace(b"event: ping\n", b": keep-alive\nevent: ping\n"),
        NAMED_SAMPLE.replace(b'data: {"type":"ping"}', b'data: {"type":\ndata: "ping"}'),
        NAMED_SAMPLE.replace(b"event: ping", b"event: error"),
        NAMED_SAMPLE.replace(b"\n\nevent: e\n", b"\n\n\nevent: e\n"),
        NAMED_SAMPLE.replace(b"event: e\n", b"id: 3\nevent: e\n"),
        NAMED_SAMPLE + b"event: cut\ndata: {",
        NAMED_SAMPLE.replace(b"event: e\n", b'data: {"type":"bare"}\n\nevent: e\n'),
    ],
    ids=[
        *("lf", "bom", "crlf", "cr", "comment", "multiline", "error", "blank", "id", "tail"),
        "mixed",
    ],
)
def test_named_events_are_the_same_at_every_split(body: bytes) -> None:
    # Cut in two at every byte offset, and byte by byte: the same events as the spec's.
    check_named_against_reference(body, [body])
    check_named_against_reference(body, bytewise(body))
    for at in range(1, len(body)):
        check_named_against_reference(body, [body[:at], body[at:]])


def test_named_fast_path_hands_over_the_usual_shape_as_data() -> None:
    items = SSEDecoder(event_names=False).feed_data(NAMED_SAMPLE)
    assert items.__class__ is MessageData
    assert [data[:20] for data in items][:2] == ['{"type":"response.cr', '{"type":"d","delta":']
    assert items[1] == '{"type":"d","delta":"caf\u00e9 \U0001f642"}'


@pytest.mark.parametrize(
    "block",
    [
        b"event: x\ndata: a\ndata: b\n\n",  # two data lines: one event, joined
        b"event: x\nevent: y\ndata: a\n\n",  # two names, one data line
        b"data: a\nevent: x\n\n",  # the name after the data
        b"event: x\n\ndata: a\n\n",  # a blank between name and data: two blocks
        b"event: x\nid: 1\n\n",  # no data: not dispatched
        b"event: x\ndata:a\n\n",  # no space after the colon
        b"event:x\ndata: a\n\n",
        b"event: x\n: c\n\n",
        b"event: error\ndata: {}\n\n",
        b"event: x\ndata: a\n\n\n",
        b"event: x\ndata: a\n: c\nevent: y\ndata: b\n\n",  # a comment where the blank was
        b"event: x\ndata: a\nid: 1\nevent: y\ndata: b\n\n",
        b"id: 1\ndata: a\n\n",  # another field where the name goes
        b"retry: 5\ndata: a\n\n",
        b"data: z\ndata: a\n\n",
    ],
)
def test_named_fast_path_refuses_every_other_shape(block: bytes) -> None:
    # Each block amid the usual shape, where the three strides and counts must catch it.
    usual = b'event: a\ndata: {"n":1}\n\n' * 3
    body = usual + block + usual
    check_named_against_reference(body, [body])
    check_named_against_reference(body, [body[: len(usual) + 3], body[len(usual) + 3 :]])
    check_named_against_reference(block + usual, [block + usual])  # the read starts with it


@st.composite
def named_streams(draw: st.DrawFn) -> bytes:
    """Mostly `event: NAME\\ndata: {...}\\n\\n`, with the odd other line or line end."""
    end = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    blocks: list[str] = ["\ufeff"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 30))):
        name = draw(st.sampled_from(["response.output_text.delta", "ping", "e", "", "error"]))
        payload = draw(st.sampled_from(['{"a":1}', "x: y", "", "\u6771\u4eac", "[DONE]"]))
        blank = end if draw(st.integers(0, 9)) else ""  # now and then no blank line
        blocks.append(f"event: {name}{end}data: {payload}{end}{blank}")
        if draw(st.integers(0, 7)) == 0:
            blocks.append(draw(LINES) + end)
    return "".join(blocks).encode()


@settings(max_examples=300, deadline=None)
@given(named_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_named_fast_path_matches_the_spec_reference_at_any_split(
    body: bytes, cuts: list[int]
) -> None:
    points = sorted({c % (len(body) + 1) for c in cuts})
    reads = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    check_named_against_reference(body, reads)
