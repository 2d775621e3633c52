"""Receipts: a tool call's side effect happens at most once per run, whatever is retried.

Guarantees: every JSON value has one canonical text or a refusal that names where and why
(`canonical_json`); a call is keyed by its tool and the hash of its canonical arguments, and
one table decides whether it runs, replays its answer, waits for a sibling or is ambiguous
(`decision`); the ledger is workflow state whose every write is fenced by attempt, packed
against the transcript when carried across continue-as-new (`ledger`).

Not guaranteed: exactly-once for an opaque tool interrupted mid-call by a crash. That call
is ambiguous and waits for a person (`steadyloop receipts --resolve`). Pure: nothing in
this package imports temporalio.
"""
