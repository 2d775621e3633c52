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

function describe(status, body) {
  const error = body && typeof body === "object" ? body.error ?? body.detail ?? body : body;
  const text = typeof error === "string" ? error : JSON.stringify(error);
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

export const api = {
  createThread: () => call("POST", "/threads", { body: {} }),
  thread: (thread) => call("GET", `/threads/${encodeURIComponent(thread)}`),
  startRun: (thread, prompt, steer, key) =>
    call("POST", `/threads/${encodeURIComponent(thread)}/runs`, {
      body: { prompt, steer },
      key,
    }),
  eventsUrl: (run) => `/runs/${encodeURIComponent(run)}/events`,
  snapshot: (run) => call("GET", `/runs/${encodeURIComponent(run)}/snapshot`),
  decide: (run, approval, approved, key) =>
    call("POST", `/runs/${encodeURIComponent(run)}/approvals/${encodeURIComponent(approval.call_id)}`, {
      body: { sha: approval.sha, tool: approval.tool, turn: approval.turn, approved },
      key,
    }),
  interrupt: (run, key) =>
    call("POST", `/runs/${encodeURIComponent(run)}/interrupt`, { body: { reason: "interrupted from the page" }, key }),
};
