// The run as a person reads it, built from its events in run order.
//
// Text goes in with textContent, never innerHTML: a model's answer or a tool's result
// is hostile input like any other. Each turn's answer is one element whose text is the
// concatenation of the turn's text deltas and nothing else, so what the page shows can
// be compared with the run's final answer byte for byte.

export class Transcript {
  /**
   * @param {{log: HTMLElement, approvals: HTMLElement, stop: HTMLElement}} at
   * @param {{approve: (a: object, approved: boolean, card: HTMLElement) => void}} act
   */
  constructor(at, act) {
    this.at = at;
    this.act = act;
    this.turns = new Map();
    this.calls = new Map();
    this.waiting = new Map();
  }

  // A new run of the thread: its turns and calls are its own (a follow-up numbers its
  // turns again, and servers that number calls per turn reuse `call_0`).
  beginRun(run) {
    for (const card of this.waiting.values()) card.remove();
    this.waiting = new Map();
    this.#noneWaiting(true);
    this.run = run;
    this.turns = new Map();
    this.calls = new Map();
  }

  // Everything shown for the current run is marked with it, so it can be drawn again.
  #add(item) {
    item.dataset.run = this.run ?? "";
    this.at.log.append(item);
  }

  // The current run drawn again from its snapshot's transcript (`messages`, its own
  // messages only), when the log no longer holds its early events.
  redraw(messages) {
    for (const item of this.at.log.querySelectorAll(":scope > li")) {
      if (item.dataset.run === (this.run ?? "")) item.remove();
    }
    this.beginRun(this.run);
    this.fromSnapshot(messages);
  }

  apply(event) {
    const handler = HANDLERS[event.type];
    if (handler) handler.call(this, event);
  }

  #turn(number) {
    let turn = this.turns.get(number);
    if (!turn) {
      const item = element("li", "turn");
      item.dataset.turn = String(number);
      item.dataset.run = this.run ?? "";
      const reasoning = element("details", "reasoning");
      reasoning.hidden = true;
      reasoning.append(element("summary", null, "reasoning"), element("pre", "reasoning-text"));
      const answer = element("div", "answer");
      const calls = element("ol", "calls");
      item.append(reasoning, answer, calls);
      this.#add(item);
      turn = { item, reasoning, answer, calls };
      this.turns.set(number, turn);
    }
    return turn;
  }

  // The run so far from its snapshot's transcript, when its early events are gone.
  fromSnapshot(messages) {
    const note = element("li", "note", "");
    note.append(
      element("span", "bang", "!"),
      element("span", "what", "The early events of this run are no longer kept: from its transcript."),
    );
    this.#add(note);
    let turn = 0;
    for (const message of messages) {
      if (message.role === "user") this.said(message.content ?? "");
      if (message.role === "assistant") {
        turn += 1;
        const at = this.#turn(`snapshot-${turn}`);
        at.answer.append(document.createTextNode(message.content ?? ""));
        for (const call of message.tool_calls ?? []) {
          this.call({
            turn: `snapshot-${turn}`,
            call_id: call.id,
            name: call.name,
            arguments: call.arguments,
            sha: null,
            fromTranscript: true,
          });
        }
      }
      if (message.role === "tool") {
        const key = [...this.calls.keys()].find((k) => k.endsWith(`/${message.tool_call_id}`));
        if (key) this.result({ ...this.calls.get(key).event, text: message.content ?? "" });
      }
    }
  }

  // What the person sent (the page knows it; the run's events start after it).
  said(text, note) {
    const item = element("li", "user");
    item.append(element("p", "said", text));
    if (note) item.append(element("p", "said-note", note));
    this.#add(item);
  }

  text(event) {
    const answer = this.#turn(event.turn).answer;
    answer.append(document.createTextNode(event.text));
  }

  // A retried attempt's reasoning supersedes the one before (its text is not the answer).
  reasoning(event) {
    const turn = this.#turn(event.turn);
    const text = turn.reasoning.querySelector(".reasoning-text");
    if (turn.reasoningAttempt !== event.attempt) text.replaceChildren();
    turn.reasoningAttempt = event.attempt;
    turn.reasoning.hidden = false;
    text.append(document.createTextNode(event.text));
  }

  call(event) {
    const card = element("li", "call");
    card.dataset.callId = event.call_id;
    const head = element("p", "call-head");
    head.append(
      element("span", "arrow", "->"),
      element("code", "tool", event.name),
      element("code", "arguments", event.arguments),
    );
    const unread = "unreadable arguments: answered with the error, not run";
    const sha = event.sha ?? (event.fromTranscript ? "(from the transcript)" : unread);
    card.append(head, element("p", "sha", `call ${event.call_id} · sha256 ${sha}`));
    this.#turn(event.turn).calls.append(card);
    this.calls.set(key(event), { card, event });
  }

  result(event) {
    const card = this.calls.get(key(event))?.card ?? this.#orphan(event);
    const answer = element("p", "result");
    answer.append(element("span", "arrow", "<-"));
    if (event.replayed) {
      answer.append(
        element("span", "replayed", "replayed, not run"),
        element("span", "why", event.replay_reason ?? ""),
      );
    }
    if (event.status && event.status !== "ok") {
      answer.append(element("span", "status", event.status.replaceAll("_", " ")));
    }
    answer.append(element("code", "output", event.text));
    card.append(answer);
  }

  #orphan(event) {
    this.call({ ...event, arguments: "", sha: null });
    return this.calls.get(key(event)).card;
  }

  approval(event) {
    this.#noneWaiting(false);
    const call = this.calls.get(key(event))?.event;
    const card = element("li", "approval");
    card.dataset.callId = event.call_id;
    card.dataset.sha = event.sha;
    card.append(
      element("p", "approval-head", `${event.tool} waits for approval (turn ${event.turn})`),
      element("code", "arguments", call ? call.arguments : ""),
      element("p", "sha", `call ${event.call_id} · sha256 ${event.sha}`),
    );
    const approve = element("button", "approve", "Approve");
    const reject = element("button", "reject", "Reject");
    approve.type = reject.type = "button";
    approve.addEventListener("click", () => this.act.approve(event, true, card));
    reject.addEventListener("click", () => this.act.approve(event, false, card));
    card.append(approve, reject, element("p", "outcome"));
    this.at.approvals.append(card);
    this.waiting.set(event.call_id, card);
  }

  decided(event) {
    if (event.decision === "approved" || event.decision === "rejected") {
      const card = this.waiting.get(event.call_id);
      if (card) {
        card.remove();
        this.waiting.delete(event.call_id);
        this.#noneWaiting(this.waiting.size === 0);
      }
    }
    const about = event.call_id ? ` ${event.call_id}` : "";
    const detail = event.detail ? `: ${event.detail}` : "";
    this.note({ turn: event.turn, text: `${event.decision}${about}${detail}`, decision: true });
  }

  ambiguous(event) {
    const text = `${event.tool} may or may not have run (attempt ${event.attempt}): ${event.reason}`;
    this.note({ turn: event.turn, text });
  }

  note(event) {
    const item = element("li", event.decision ? "note decision" : "note");
    item.append(element("span", "bang", "!"), element("span", "what", event.text));
    const turn = this.turns.get(event.turn);
    if (turn) turn.calls.append(item);
    else this.#add(item);
  }

  stop(event) {
    const line = element("li", "stopped", `stopped: ${event.reason}`);
    line.dataset.reason = event.reason;
    this.#add(line);
    const stop = this.at.stop;
    stop.replaceChildren();
    stop.hidden = false;
    stop.dataset.reason = event.reason;
    stop.append(element("p", "stop-reason", `stop reason: ${event.reason}`));
    if (event.detail) stop.append(element("p", "stop-detail", event.detail));
    if (event.partial !== null && event.partial !== undefined) {
      const how = event.shown ? "shown before the stop" : "written, never shown";
      stop.append(element("p", "partial-head", `partial answer (${how}):`));
      stop.append(element("pre", "partial", event.partial));
    }
    for (const card of this.waiting.values()) {
      for (const button of card.querySelectorAll("button")) button.disabled = true;
      card.querySelector(".outcome").textContent = "the run ended before a decision";
    }
  }

  #noneWaiting(none) {
    const placeholder = this.at.approvals.querySelector(".none");
    if (placeholder) placeholder.hidden = !none;
  }
}

// One handler per `type` of `steadyloop.events._models.RunEventItem`.
const HANDLERS = {
  text_delta: Transcript.prototype.text,
  reasoning_delta: Transcript.prototype.reasoning,
  tool_call: Transcript.prototype.call,
  tool_result: Transcript.prototype.result,
  approval_waiting: Transcript.prototype.approval,
  ambiguous_receipt: Transcript.prototype.ambiguous,
  timeline: Transcript.prototype.note,
  decision: Transcript.prototype.decided,
  stop: Transcript.prototype.stop,
};

function key(event) {
  return `${event.turn}/${event.call_id}`;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}
