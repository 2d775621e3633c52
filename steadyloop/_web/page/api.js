// The server's routes, as the page calls them (one place, so a renamed route is one edit).
//
// Every POST that decides something carries an `Idempotency-Key` (the server makes it the
// Temporal update id): the key is chosen once per decision the person makes, not per
// request, so a double click, or a retry after a dropped response, records one decision.

export class ApiError extends Error {
  constructor(status, body) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
  }
}

// The server's refusals are `{"error": {"code", "message", "field"?}}`.
function describe(status, body) {
  const error = body && typeof body === "object" ? body.error ?? body : body;
  const text = typeof error?.message === "string" ? error.message : JSON.stringify(error);
  return `HTTP ${status}: ${text}`;
}

async function call(method, path, { body, key } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["Idempotency-Key"] = key;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const text = await response.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return { status: response.status, body: parsed };
}

// 128 random bits as hex. (`crypto.randomUUID` exists only on https and localhost pages;
// a page served over plain http on another host must still be able to decide.)
export function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const enc = encodeURIComponent;
const runPath = (thread, run) => `/v1/threads/${enc(thread)}/runs/${enc(run)}`;

// The routes of `steadyloop._web.app` (its module docstring is the table).
export const api = {
  createThread: () => call("POST", "/v1/threads", { body: {} }),
  thread: (thread) => call("GET", `/v1/threads/${enc(thread)}`),
  startRun: (thread, prompt, steer, key) =>
    call("POST", `/v1/threads/${enc(thread)}/runs`, { body: { prompt, steer }, key }),
  eventsUrl: (thread, run) => `${runPath(thread, run)}/events`,
  snapshot: (thread, run) => call("GET", runPath(thread, run)),
  decide: (thread, run, approval, approve, key) =>
    call("POST", `${runPath(thread, run)}/approvals/${enc(approval.call_id)}`, {
      body: { approve, sha256: approval.sha, tool: approval.tool, turn: approval.turn },
      key,
    }),
  interrupt: (thread, run, key) =>
    call("POST", `${runPath(thread, run)}/interrupt`, {
      body: { reason: "interrupted from the page" },
      key,
    }),
};
