"""Every route under hostile input: a 4xx JSON error naming the field, nothing started,
no traceback, and the server keeps serving."""

from __future__ import annotations

import asyncio
import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from web_fake_backend import FakeBackend, FakeRun

from steadyloop._web.app import create_app
from steadyloop._web.settings import web_settings

TOKEN = "acme-token"
# One app for every example (building one per example costs most of the run).
backend = FakeBackend()
app = create_app(backend, web_settings({}, {"STEADYLOOP_WEB_TOKENS": f"acme={TOKEN}"}))
ROUTES = [
    ("POST", "/v1/threads"),
    ("GET", "/v1/threads/{thread}"),
    ("POST", "/v1/threads/{thread}/runs"),
    ("GET", "/v1/threads/{thread}/runs/{run}/events"),
    ("GET", "/v1/threads/{thread}/runs/{run}"),
    ("POST", "/v1/threads/{thread}/runs/{run}/approvals/{call}"),
    ("POST", "/v1/threads/{thread}/runs/{run}/interrupt"),
    ("POST", "/v1/threads/{thread}/runs/{run}/pause"),
    ("POST", "/v1/threads/{thread}/runs/{run}/unpause"),
    ("POST", "/v1/threads/{thread}/runs/{run}/messages"),
    ("POST", "/v1/threads/{thread}/runs/{run}/receipts/{call}"),
    ("POST", "/ag-ui"),
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
known_keys = st.sampled_from(
    [
        "prompt",
        "steer",
        "thread_id",
        "approve",
        "sha256",
        "reason",
        "content",
        "resolution",
        "tenant_id",
        "max_turns",
        "model",
        "threadId",
        "runId",
        "messages",
        "resume",
    ]
)
messages = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=5), "role": st.sampled_from(["user", "assistant", "tool", "x"])},
        optional={"content": json_values, "toolCallId": st.text(max_size=5)},
    ),
    max_size=3,
)
agui_inputs = st.fixed_dictionaries(
    {"threadId": st.text(max_size=12), "runId": st.text(max_size=12), "messages": messages},
    optional={
        "resume": st.lists(
            st.fixed_dictionaries(
                {
                    "interruptId": st.text(max_size=30) | st.just("1:000000-000000000000:x:c"),
                    "status": st.sampled_from(["resolved", "cancelled", "maybe"]),
                },
                optional={"payload": json_values},
            ),
            max_size=2,
        )
    },
).map(lambda v: json.dumps(v).encode())
bodies = st.one_of(
    st.binary(max_size=200),
    agui_inputs,
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(known_keys, json_values, max_size=4).map(lambda v: json.dumps(v).encode()),
    st.sampled_from(
        [
            b'{"prompt": "\\ud800x"}',
            b'{"content": "\\udfff"}',
            b'{"prompt": 1e400}',
            b'{"prompt": NaN}',
            b'{"\\ud800": 1}',
            b'{"prompt": "a\\u0000"}',
            b"\xff{}",
        ]
    ),
)
ids = st.one_of(
    st.sampled_from(["t1", "t1-run-1", "call_0", "%ED%A0%80", "%00", "..", "a%2Fb", "x" * 300]),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="/?#%"), min_size=1, max_size=20
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    route=st.sampled_from(ROUTES),
    body=bodies,
    thread=ids,
    run=ids,
    call=ids,
    after=st.none() | st.text(max_size=30),
    key=st.none() | st.text(max_size=30),
)
def test_no_input_gets_a_5xx_or_starts_anything(
    route: tuple[str, str],
    body: bytes,
    thread: str,
    run: str,
    call: str,
    after: str | None,
    key: str | None,
) -> None:
    asyncio.run(_one(route, body, thread, run, call, after, key))


def _answered(run: FakeRun) -> None:
    run.publish("stop", turn=0, reason="final_answer")


async def _one(
    route: tuple[str, str],
    body: bytes,
    thread: str,
    run: str,
    call: str,
    after: str | None,
    key: str | None,
) -> None:
    backend.threads.clear()
    backend.threads[("acme", "t1")] = []
    backend.on_start = _answered
    method, template = route
    path = template.format(thread=thread, run=run, call=call)
    headers = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key.encode("utf-8", "surrogatepass")  # type: ignore[assignment]
    params = {"after": after} if after is not None else None
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        base_url="http://test",
    ) as http:
        try:
            answer = await http.request(method, path, content=body, headers=headers, params=params)
        except httpx.InvalidURL:
            return  # a URL no client could send
        assert answer.status_code < 500, (method, path, body, answer.text)
        if answer.status_code >= 400:
            error = answer.json()["error"]
            assert error["code"] and error["message"]
            assert "Traceback" not in answer.text
        started = [r for runs in backend.threads.values() for r in runs]
        starts = template.endswith("/runs") or template == "/ag-ui"
        if not (method == "POST" and starts and answer.status_code in (200, 201)):
            assert started == []
        alive = await http.get("/healthz")
        assert alive.status_code == 200
