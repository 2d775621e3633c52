"""Stop reasons that tell the truth: what a cut answer is, how a run goes on from it, and
what each stop says to a person (pure rules; the workflow and the CLI import them).

- `continuation`: the request that asks a model for the rest of an answer it was cut
  off in (a prefill, or the text and a user message), and how pieces join.
- `budget`: counting a turn's tokens while it streams, so a token budget bounds the
  turn in flight, not only the next one.
- `stop_text`: the header, partial-output line and next-step hint of each stop reason,
  and the message a resumed run starts with.
"""
