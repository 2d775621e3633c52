// The page: one thread (`?thread=ID`), each of its runs followed in order, live.
//
// What a person does here maps one to one onto the server's routes (api.js); what they
// see is built only from the runs' events (render.js), read by cursor (stream.js), so a
// reload, a second tab and a dropped connection all show the same thing.

import { api, ApiError, newKey } from "./api.js";
import { Transcript } from "./render.js";
import { RunStream, isStop } from "./stream.js";

const $ = (selector) => document.querySelector(selector);

const state = {
  thread: new URLSearchParams(location.search).get("thread"),
  run: null, // the run being followed
  live: false, // whether that run is still going
  stream: null,
  interruptKey: null,
  followed: new Set(),
  userMessages: 0, // user messages of the runs followed so far
  inherited: 0, // transcript messages of the runs followed so far
};

// A handle for people (and tests) looking at the page from the console.
window.steadyloop = state;

const transcript = new Transcript(
  { log: $("#log"), approvals: $("#approvals"), stop: $("#stop") },
  { approve: decide },
);

function problem(text) {
  $("#problem").textContent = text ?? "";
  if (text && text.startsWith("HTTP 401")) askForToken();
}

function connection(status) {
  const node = $("#connection");
  node.textContent = status;
  node.dataset.state = status.split(" ")[0];
}

function where() {
  $("#where").textContent = state.thread
    ? `thread ${state.thread}${state.run ? ` · run ${state.run}` : ""}`
    : "no thread yet";
}

async function load() {
  where();
  if (!state.thread) return;
  try {
    const { body } = await api.thread(state.thread);
    for (const run of body.runs ?? []) {
      if (state.followed.has(run)) continue;
      await follow(run, await promptOf(run));
      await inherit(run);
    }
  } catch (error) {
    problem(error.message);
  }
}

// What the person asked a run: its first user message after those of the runs before it
// (a follow-up's transcript starts with everything the thread said so far).
async function promptOf(run) {
  const prompt = (await userMessages(run))[state.userMessages];
  return typeof prompt?.content === "string" ? prompt.content : "";
}

async function userMessages(run) {
  return (await transcriptOf(run)).filter((m) => m.role === "user");
}

async function transcriptOf(run) {
  const { body } = await api.snapshot(state.thread, run);
  return body.transcript ?? [];
}

// What the next run of the thread starts with: everything `run` ended with.
async function inherit(run) {
  const messages = await transcriptOf(run);
  state.inherited = messages.length;
  state.userMessages = messages.filter((m) => m.role === "user").length; // steered too
}

// Resolves when the run's stop has been applied (or the stream ended without one).
function follow(run, prompt, after = null) {
  state.followed.add(run);
  state.run = run;
  state.live = true;
  state.interruptKey = newKey();
  $("#interrupt").disabled = false;
  $("#stop").hidden = true;
  where();
  if (after === null) transcript.beginRun(run);
  if (prompt) transcript.said(prompt);
  return new Promise((resolve) => {
    const url = api.eventsUrl(state.thread, run);
    const stream = new RunStream(url, `steadyloop:${state.thread}:${run}`, {
      event: (event) => {
        const following = atBottom();
        transcript.apply(event);
        if (following) window.scrollTo(0, document.body.scrollHeight);
        if (isStop(event)) {
          ended();
          resolve();
        }
      },
      status: (status) => {
        connection(status);
        if (status === "refused (HTTP 401)") askForToken();
        if (status === "ended" || status.startsWith("refused")) {
          ended();
          resolve();
        }
      },
      expired: async () => {
        // The log no longer holds this run's early events: show the run's transcript
        // from its snapshot instead, then read on after the snapshot's cursor.
        sessionStorage.removeItem(stream.storageKey);
        try {
          const { body } = await api.snapshot(state.thread, run);
          transcript.redraw((body.transcript ?? []).slice(state.inherited));
          follow(run, null, body.cursor ?? null).then(resolve);
        } catch (error) {
          problem(error.message);
          ended();
          resolve();
        }
      },
    });
    state.stream = stream;
    stream.start(after);
  });
}

// Whether the person is reading the newest text (then the page keeps it in view).
function atBottom() {
  return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
}

function ended() {
  state.live = false;
  $("#interrupt").disabled = true;
  connection("ended");
}

async function send(event) {
  event.preventDefault();
  const form = event.target;
  const prompt = form.prompt.value.trim();
  const steer = form.steer.checked;
  if (!prompt) return;
  problem("");
  const key = newKey();
  try {
    if (!state.thread) {
      const { body } = await api.createThread();
      state.thread = body.thread_id;
      history.replaceState(null, "", `?thread=${encodeURIComponent(state.thread)}`);
    }
    const { body } = await api.startRun(state.thread, prompt, steer, key);
    form.prompt.value = "";
    if (body.outcome === "steered") {
      transcript.said(prompt, "sent to the run in flight: it reads it at its next turn");
      return;
    }
    if (state.run && !state.followed.has(body.run_id)) await inherit(state.run);
    state.userMessages += 1;
    if (!state.followed.has(body.run_id)) await follow(body.run_id, prompt);
  } catch (error) {
    problem(error instanceof ApiError ? error.message : String(error));
  }
}

// One key per decision shown: the approval card keeps it, so a second click on the same
// button sends the same key and the server records one decision.
async function decide(approval, approved, card) {
  const choice = approved ? "approve" : "reject";
  const keyName = `${choice}Key`;
  card.dataset[keyName] ??= newKey();
  const outcome = card.querySelector(".outcome");
  try {
    const { status } = await api.decide(state.thread, state.run, approval, approved, card.dataset[keyName]);
    outcome.textContent =
      status === 202 ? `${choice}: sent; no worker has taken it yet, it applies when one does` : `${choice}: recorded`;
    card.dataset.sent = `${choice} ${status}`;
  } catch (error) {
    outcome.textContent = error.message;
  }
}

async function interrupt() {
  if (!state.run) return;
  try {
    await api.interrupt(state.thread, state.run, state.interruptKey);
  } catch (error) {
    problem(error.message);
  }
}

// The bearer token, for a server that has tokens: kept in a SameSite=Strict cookie (the
// server reads it when a request has no Authorization header), because an EventSource
// cannot send headers. It arrives in the address's fragment (`/#token=...`, never sent
// to a server or written to its log) or from the form a 401 shows, and leaves the
// address bar at once.
function keepToken(token) {
  const secure = location.protocol === "https:" ? "; Secure" : "";
  document.cookie = `steadyloop_token=${encodeURIComponent(token)}; Path=/; SameSite=Strict${secure}`;
}

function tokenFromAddress() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get("token");
  if (!token) return;
  keepToken(token);
  history.replaceState(null, "", location.pathname + location.search);
}

function askForToken() {
  $("#token-form").hidden = false;
}

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  keepToken(event.target.token.value.trim());
  location.reload();
});

$("#composer").addEventListener("submit", send);
$("#interrupt").addEventListener("click", interrupt);
tokenFromAddress();
load();
