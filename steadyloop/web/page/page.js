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
};

// A handle for people (and tests) looking at the page from the console.
window.steadyloop = state;

const transcript = new Transcript(
  { log: $("#log"), approvals: $("#approvals"), stop: $("#stop") },
  { approve: decide },
);

function problem(text) {
  $("#problem").textContent = text ?? "";
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
    await followRuns(body.runs ?? []);
  } catch (error) {
    problem(error.message);
  }
}

async function followRuns(runs) {
  for (const run of runs) {
    if (state.followed.has(run.run_id)) continue;
    await follow(run);
  }
}

// Resolves when the run's stop has been applied (or the stream ended without one).
function follow(run) {
  state.followed.add(run.run_id);
  state.run = run.run_id;
  state.live = true;
  state.interruptKey = newKey();
  $("#interrupt").disabled = false;
  $("#stop").hidden = true;
  where();
  if (run.prompt) transcript.said(run.prompt);
  return new Promise((resolve) => {
    const stream = new RunStream(api.eventsUrl(run.run_id), `steadyloop:${run.run_id}`, {
      event: (event) => {
        transcript.apply(event);
        if (isStop(event)) {
          ended();
          resolve();
        }
      },
      status: (status) => {
        connection(status);
        if (status === "ended" || status.startsWith("refused")) {
          ended();
          resolve();
        }
      },
      expired: (body) => {
        problem(`This run's early events are no longer kept: ${body.error ?? JSON.stringify(body)}`);
        ended();
        resolve();
      },
    });
    state.stream = stream;
    stream.start();
  });
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
    if (body.steered) {
      transcript.said(prompt, "delivered at the next turn boundary");
      return;
    }
    await follow({ run_id: body.run_id, prompt });
  } catch (error) {
    problem(error instanceof ApiError ? error.message : String(error));
  }
}

// One key per decision shown: the approval card keeps it, so a second click on the same
// button sends the same key and the server records one decision.
async function decide(approval, approved, card) {
  const choice = approved ? "approve" : "reject";
  card.dataset[choice] ??= newKey();
  const outcome = card.querySelector(".outcome");
  try {
    const { status, body } = await api.decide(state.run, approval, approved, card.dataset[choice]);
    outcome.textContent =
      status === 202
        ? `${choice} recorded, waiting for a worker to apply it`
        : body?.detail ?? `${choice}d`;
    card.dataset.sent = choice;
  } catch (error) {
    outcome.textContent = error.message;
  }
}

async function interrupt() {
  if (!state.run) return;
  try {
    await api.interrupt(state.run, state.interruptKey);
  } catch (error) {
    problem(error.message);
  }
}

$("#composer").addEventListener("submit", send);
$("#interrupt").addEventListener("click", interrupt);
load();
