// Following one run's events over SSE, so that no text is ever shown twice or skipped.
//
// The ways the obvious page goes wrong, and what here prevents each:
// - A dropped connection: EventSource reconnects by itself and sends the last `id:` it
//   saw as `Last-Event-ID`, so the server continues after it. But it gives up for good
//   on an HTTP error (a server restarting answers 502, or nothing), so a closed source
//   is opened again here, after the last cursor (`?after=`), with a backoff.
// - An event delivered twice (a reconnect racing the last event before a cut): every
//   event is applied at most once, by its cursor (`seen`).
// - A reload: the tab's sessionStorage keeps the events applied so far and the last
//   cursor; the reloaded page renders them again and continues after that cursor.
//   A new tab has no sessionStorage and reads the run from its first event.
// - A cursor older than what the server retains (410): the page is told, shows the
//   run's snapshot in its place, and reads on after the snapshot's cursor; never a
//   silent skip forward.
// - The run's end: the stop event closes the source; a reconnect after it would be
//   answered 204 ("nothing more"), which EventSource reports only as an error.
// - Seven tabs on one run: HTTP/1.1 allows six connections per origin, so a seventh
//   EventSource (and every request after it, approvals included) would wait forever.
//   The tabs of one run share one connection: the tab holding the run's Web Lock reads
//   the stream and passes each event to the others on a BroadcastChannel; a tab that
//   joins asks it for what came after its own cursor; when that tab closes, the lock
//   passes to another, which opens the stream after its own cursor. (Web Locks exist on
//   https and localhost pages only; elsewhere each tab reads the stream itself.)

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 5000;
// What was applied is saved together with its cursor, at most this often: a tab closed
// between two saves loses nothing a reload could not read again after the saved cursor.
const PERSIST_EVERY_MS = 200;

export class RunStream {
  /**
   * @param {string} url the run's events route
   * @param {string} storageKey where this tab keeps what it applied
   * @param {{event: (e: object, cursor: string) => void, status: (s: string) => void,
   *          expired: (body: object) => void}} on
   */
  constructor(url, storageKey, on) {
    this.url = url;
    this.storageKey = storageKey;
    this.on = on;
    this.cursor = null;
    this.seen = new Set();
    this.applied = [];
    this.received = []; // every id as it came off the wire, repeats included
    this.source = null;
    this.ended = false;
    this.delay = RECONNECT_MIN_MS;
    this.timer = null;
    this.saving = null;
    this.leading = false;
    this.channel = null;
    this.release = null;
    this.waiting = []; // live events from the leading tab, held until we are in step
    this.synced = false; // whether the leading tab has sent us what we were missing
  }

  // `after`: read on after this cursor instead of from the start (a snapshot's).
  start(after = null) {
    if (after !== null) this.cursor = after;
    for (const [cursor, event] of this.#restored()) this.#apply(cursor, event, false);
    if (this.ended) return;
    if (!navigator.locks || typeof BroadcastChannel === "undefined") {
      this.#lead();
      return;
    }
    this.channel = new BroadcastChannel(this.storageKey);
    this.channel.onmessage = (message) => this.#heard(message.data);
    this.channel.postMessage({ kind: "hello", after: this.cursor });
    navigator.locks.request(this.storageKey, () => {
      if (this.ended) return undefined;
      this.#lead();
      return new Promise((resolve) => {
        this.release = resolve; // held until this tab's stream ends or the tab closes
      });
    });
  }

  #lead() {
    this.leading = true;
    if (this.channel) this.channel.postMessage({ kind: "leader" });
    this.#open();
  }

  // What another tab of this run said. The leading tab answers a `hello` with every
  // event after the asker's cursor (`replay`), then sends each event it reads (`live`),
  // in order on one channel: a tab applies live events only once it is in step, so an
  // event never lands before those it follows.
  #heard(message) {
    if (this.leading) {
      if (message.kind === "hello") {
        const after = message.after;
        const missing = this.applied.filter(([cursor]) => after === null || cursor > after);
        this.channel.postMessage({ kind: "replay", events: missing });
      }
      return;
    }
    if (message.kind === "leader") {
      this.channel.postMessage({ kind: "hello", after: this.cursor });
    } else if (message.kind === "replay") {
      this.#applyAfter(message.events);
      this.synced = true;
      this.#applyAfter(this.waiting);
      this.waiting = [];
    } else if (message.kind === "live") {
      if (this.synced) this.#applyAfter(message.events);
      else this.waiting.push(...message.events);
    }
  }

  // Events from the leading tab that follow ours, once each (cursors sort as text).
  #applyAfter(events) {
    for (const [cursor, event] of events) {
      if (this.ended) return;
      if (!this.seen.has(cursor) && (this.cursor === null || cursor > this.cursor)) {
        this.#apply(cursor, event, true);
      }
    }
  }

  close() {
    this.ended = true;
    if (this.saving !== null) {
      clearTimeout(this.saving);
      this.saving = null;
      this.#save();
    }
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
    if (this.release) this.release();
    if (this.channel) this.channel.close();
    this.channel = null;
  }

  #open() {
    const url = this.cursor === null ? this.url : `${this.url}?after=${encodeURIComponent(this.cursor)}`;
    const source = new EventSource(url);
    this.source = source;
    this.on.status("connecting");
    source.onopen = () => {
      this.delay = RECONNECT_MIN_MS;
      this.on.status("live");
    };
    // The server names each event (`event: <type>`), so there is no onmessage to use.
    for (const type of EVENT_TYPES) {
      source.addEventListener(type, (message) => this.#received(message));
    }
    source.onerror = () => {
      if (this.ended || source !== this.source) return;
      if (source.readyState === EventSource.CONNECTING) {
        this.on.status("reconnecting"); // EventSource retries with Last-Event-ID itself
        return;
      }
      source.close();
      this.source = null;
      this.#diagnose();
    };
  }

  #received(message) {
    const cursor = message.lastEventId;
    this.received.push(cursor);
    if (this.seen.has(cursor)) return;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      this.on.status("a malformed event was ignored");
      return;
    }
    this.#apply(cursor, event, true);
  }

  #apply(cursor, event, fresh) {
    this.seen.add(cursor);
    this.cursor = cursor;
    this.applied.push([cursor, event]);
    if (fresh) this.#persist();
    if (fresh && this.leading && this.channel) {
      this.channel.postMessage({ kind: "live", events: [[cursor, event]] });
    }
    this.on.event(event, cursor);
    if (isStop(event)) this.close();
  }

  // A closed source says nothing of why: ask the route once, without reading a body.
  async #diagnose() {
    const controller = new AbortController();
    let status = 0;
    let body = null;
    try {
      const headers = this.cursor === null ? {} : { "Last-Event-ID": this.cursor };
      const response = await fetch(this.url, { headers, signal: controller.signal });
      status = response.status;
      if (status === 410 || status === 404) body = await response.json().catch(() => null);
    } catch {
      status = 0; // the server is not answering: keep trying
    } finally {
      controller.abort();
    }
    if (status === 204) {
      this.ended = true;
      this.on.status("ended");
    } else if (status === 410) {
      this.ended = true;
      this.on.expired(body ?? {});
    } else if (status === 404 || status === 401 || status === 403) {
      this.ended = true;
      this.on.status(`refused (HTTP ${status})`);
    } else {
      this.#retry();
    }
  }

  #retry() {
    this.on.status("reconnecting");
    this.timer = setTimeout(() => {
      if (!this.ended) this.#open();
    }, this.delay);
    this.delay = Math.min(this.delay * 2, RECONNECT_MAX_MS);
  }

  #restored() {
    try {
      const stored = JSON.parse(sessionStorage.getItem(this.storageKey) ?? "[]");
      return Array.isArray(stored) ? stored : [];
    } catch {
      return [];
    }
  }

  #persist() {
    if (this.saving !== null) return;
    this.saving = setTimeout(() => {
      this.saving = null;
      this.#save();
    }, PERSIST_EVERY_MS);
  }

  #save() {
    try {
      sessionStorage.setItem(this.storageKey, JSON.stringify(this.applied));
    } catch {
      // Over the storage quota: a reload then reads the run from its first event.
      sessionStorage.removeItem(this.storageKey);
    }
  }
}

// The `type`s of `steadyloop.events._models.RunEventItem`.
export const EVENT_TYPES = [
  "text_delta",
  "reasoning_delta",
  "tool_call",
  "tool_result",
  "approval_waiting",
  "ambiguous_receipt",
  "timeline",
  "decision",
  "stop",
];

export function isStop(event) {
  return event.type === "stop";
}
