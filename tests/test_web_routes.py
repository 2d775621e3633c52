"""The HTTP routes over an in-memory backend: status codes, idempotency, tenancy, SSE."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from web_fake_backend import FakeBackend, FakeRun, cursor

from steadyloop._web.app import create_app
from steadyloop._web.settings import web_settings

ACME = "acme-token"
GLOBEX = "globex-token"
SHA = "a" * 64


def make_settings(**web: object) -> object:
    return web_settings(web, {"STEADYLOOP_WEB_TOKENS": f"acme={ACME},globex={GLOBEX}"})


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def client(backend: FakeBackend) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(backend, make_settings(cors_origins=["https://app.example"]))  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://test",
        headers={"Authorization": f"Bearer {ACME}"},
    ) as http:
        yield http


def parse_sse(text: str) -> list[dict[str, str]]:
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if fields:
            frames.append(fields)
    return frames


async def started_run(client: httpx.AsyncClient, thread: str = "t1") -> str:
    await client.post("/v1/threads", json={"thread_id": thread})
    answer = await client.post(f"/v1/threads/{thread}/runs", json={"prompt": "hi"})
    assert answer.status_code == 201, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


def finished(backend: FakeBackend, run_id: str, thread: str = "t1") -> FakeRun:
    run = backend.run("acme", thread, run_id)
    run.publish("text_delta", turn=0, attempt=0, text="Hel")
    run.publish("text_delta", turn=0, attempt=0, text="lo")
    run.publish("stop", turn=0, reason="final_answer", final_answer="Hello")
    return run


async def test_a_thread_is_created_with_a_chosen_or_minted_id(client: httpx.AsyncClient) -> None:
    chosen = await client.post("/v1/threads", json={"thread_id": "mine"})
    minted = await client.post("/v1/threads")
    assert chosen.status_code == 201 and chosen.json() == {"thread_id": "mine"}
    assert minted.status_code == 201 and minted.json()["thread_id"] == "thread-1"


async def test_a_retried_start_with_its_key_attaches_to_the_run_it_started(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    await client.post("/v1/threads", json={"thread_id": "t1"})
    headers = {"Idempotency-Key": "k-1"}
    first = await client.post("/v1/threads/t1/runs", json={"prompt": "hi"}, headers=headers)
    again = await client.post("/v1/threads/t1/runs", json={"prompt": "hi"}, headers=headers)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.json()["outcome"] == "attached"
    assert len(backend.threads[("acme", "t1")]) == 1


async def test_a_second_message_in_flight_is_409_naming_the_run_unless_steered(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    refused = await client.post("/v1/threads/t1/runs", json={"prompt": "and?"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "run_in_flight"
    assert refused.json()["error"]["run_id"] == run_id
    steered = await client.post("/v1/threads/t1/runs", json={"prompt": "and?", "steer": True})
    assert steered.status_code == 202 and steered.json()["run_id"] == run_id
    assert backend.run("acme", "t1", run_id).messages == ["and?"]


async def test_events_carry_their_cursor_as_the_sse_id_and_resume_after_it(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    finished(backend, run_id)
    url = f"/v1/threads/t1/runs/{run_id}/events"
    whole = await client.get(url)
    assert whole.status_code == 200
    assert whole.headers["x-accel-buffering"] == "no"
    assert whole.headers["content-type"].startswith("text/event-stream")
    frames = parse_sse(whole.text)
    assert [f["id"] for f in frames] == [cursor(0), cursor(1), cursor(2)]
    assert [f["event"] for f in frames] == ["text_delta", "text_delta", "stop"]
    assert json.loads(frames[0]["data"])["text"] == "Hel"
    by_query = parse_sse((await client.get(url, params={"after": cursor(0)})).text)
    by_header = parse_sse((await client.get(url, headers={"Last-Event-ID": cursor(0)})).text)
    assert [f["id"] for f in by_query] == [f["id"] for f in by_header] == [cursor(1), cursor(2)]


async def test_nothing_more_after_the_stop_is_204(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    finished(backend, run_id)
    answer = await client.get(f"/v1/threads/t1/runs/{run_id}/events?after={cursor(2)}")
    assert answer.status_code == 204 and answer.content == b""


async def test_a_cursor_behind_retention_is_410_with_the_oldest_held(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    finished(backend, run_id).oldest = 2
    answer = await client.get(f"/v1/threads/t1/runs/{run_id}/events?after={cursor(0)}")
    assert answer.status_code == 410
    assert answer.json()["error"]["oldest"] == cursor(2)
    assert answer.json()["error"]["field"] == "query.after"


async def test_another_tenants_thread_is_404_on_every_route(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    finished(backend, run_id)
    other = {"Authorization": f"Bearer {GLOBEX}"}
    base = f"/v1/threads/t1/runs/{run_id}"
    routes = [
        ("GET", "/v1/threads/t1", None),
        ("POST", "/v1/threads/t1/runs", {"prompt": "mine now", "tenant_id": "acme"}),
        ("POST", "/v1/threads/t1/runs", {"prompt": "mine now"}),
        ("GET", f"{base}/events", None),
        ("GET", base, None),
        ("POST", f"{base}/approvals/call_0", {"approve": True, "sha256": SHA}),
        ("POST", f"{base}/interrupt", {}),
        ("POST", f"{base}/pause", {}),
        ("POST", f"{base}/unpause", {}),
        ("POST", f"{base}/messages", {"content": "hello"}),
        ("POST", f"{base}/receipts/k", {"resolution": {"kind": "give_up"}}),
    ]
    for method, path, body in routes:
        answer = await client.request(method, path, json=body, headers=other)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"]["code"] == "thread_not_found"
    assert backend.run("acme", "t1", run_id).messages == []
    assert len(backend.threads[("acme", "t1")]) == 1  # nothing started, on either tenant
    assert ("globex", "t1") not in backend.threads


async def test_no_known_token_is_401(client: httpx.AsyncClient) -> None:
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer nope"}):
        answer = await client.post("/v1/threads", headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
    assert (await client.get("/healthz", headers={"Authorization": ""})).status_code == 200


async def test_an_approval_is_recorded_once_bound_to_its_sha(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    run = backend.run("acme", "t1", run_id)
    run.pending["call_0"] = SHA
    url = f"/v1/threads/t1/runs/{run_id}/approvals/call_0"
    wrong = await client.post(url, json={"approve": True, "sha256": "b" * 64})
    assert wrong.status_code == 409
    assert wrong.json()["error"]["waiting"] == [{"call_id": "call_0", "sha256": SHA}]
    key = {"Idempotency-Key": "click-1"}
    first = await client.post(url, json={"approve": True, "sha256": SHA}, headers=key)
    second = await client.post(url, json={"approve": True, "sha256": SHA}, headers=key)
    assert first.status_code == second.status_code == 200
    assert run.decided == [("call_0", True)]
    unknown = await client.post(f"{url}x", json={"approve": True, "sha256": SHA})
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "path.call_id"


async def test_an_approval_with_no_worker_is_202_waiting(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    backend.run("acme", "t1", run_id).pending["call_0"] = SHA
    backend.worker_up = False
    answer = await client.post(
        f"/v1/threads/t1/runs/{run_id}/approvals/call_0", json={"approve": True, "sha256": SHA}
    )
    assert answer.status_code == 202
    assert answer.json()["status"] == "waiting_for_worker"


async def test_steering_an_ended_run_is_409(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    finished(backend, run_id)
    answer = await client.post(f"/v1/threads/t1/runs/{run_id}/interrupt", json={})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "run_ended"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 400, "body"),
        (b'{"prompt": 3}', 400, "body.prompt"),
        (b'{"prompt": "\\ud800"}', 400, "body.prompt"),
        (b'{"prompt": "a\\u0000b"}', 400, "body.prompt"),
        (b'{"prompt": "hi", "tenant": "globex"}', 400, "body.tenant"),
        (b'{"prompt": "hi", "max_turns": 1e300}', 400, "body.max_turns"),
        (b'{"prompt": "hi", "max_turns": NaN}', 400, "body"),
        (b"[1, 2]", 400, "body"),
        (b"\xff\xfe", 400, "body"),
    ],
)
async def test_bad_input_is_a_4xx_naming_the_field_and_starts_nothing(
    client: httpx.AsyncClient, backend: FakeBackend, body: bytes, status: int, field: str
) -> None:
    await client.post("/v1/threads", json={"thread_id": "t1"})
    answer = await client.post(
        "/v1/threads/t1/runs", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["field"] == field
    assert backend.threads[("acme", "t1")] == []


async def test_a_body_over_the_limit_is_413(backend: FakeBackend) -> None:
    app = create_app(backend, make_settings(max_body_bytes=2048))  # type: ignore[arg-type]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"Authorization": f"Bearer {ACME}"},
    ) as http:
        await http.post("/v1/threads", json={"thread_id": "t1"})
        answer = await http.post("/v1/threads/t1/runs", json={"prompt": "x" * 5000})
        assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"
        assert backend.threads[("acme", "t1")] == []


async def test_cors_answers_only_the_allowed_origins(client: httpx.AsyncClient) -> None:
    preflight = {"Access-Control-Request-Method": "POST"}
    allowed = await client.options(
        "/v1/threads", headers={"Origin": "https://app.example", **preflight}
    )
    refused = await client.options(
        "/v1/threads", headers={"Origin": "https://evil.example", **preflight}
    )
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in refused.headers


async def test_streams_past_the_tenants_limit_are_429_with_retry_after(
    backend: FakeBackend,
) -> None:
    settings = web_settings(
        {"tenants": {"acme": {"max_streams": 1}}}, {"STEADYLOOP_WEB_TOKENS": f"acme={ACME}"}
    )
    app = create_app(backend, settings)
    app.state.slots.open["acme"] = 1  # one stream already open on this process
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"Authorization": f"Bearer {ACME}"},
    ) as http:
        run_id = await started_run(http)
        answer = await http.get(f"/v1/threads/t1/runs/{run_id}/events")
        assert answer.status_code == 429 and answer.headers["retry-after"] == "5"


async def test_the_openapi_spec_and_page_list_every_route(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/threads/{thread_id}/runs/{run_id}/events" in spec["paths"]
    page = await client.get("/docs")
    assert page.status_code == 200 and "/v1/threads/{thread_id}/runs" in page.text
    assert "cdn" not in page.text.lower()


async def test_a_lone_surrogate_deep_in_a_free_form_body_is_refused_by_its_path(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    run_id = await started_run(client)
    calls = backend.calls
    answer = await client.post(
        f"/v1/threads/t1/runs/{run_id}/receipts/k",
        content=b'{"resolution": {"kind": "happened", "result": ["ok", "\\udc80"]}}',
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "body.resolution.result[1]"
    assert backend.calls == calls  # refused before the backend was asked anything


async def test_a_run_past_the_tenants_limits_is_429_with_retry_after(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    await client.post("/v1/threads", json={"thread_id": "t1"})
    backend.refuse_runs = 12.4
    answer = await client.post("/v1/threads/t1/runs", json={"prompt": "hi"})
    assert answer.status_code == 429 and answer.headers["retry-after"] == "12"
    assert answer.json()["error"]["code"] == "too_many_runs"
    assert backend.threads[("acme", "t1")] == []
