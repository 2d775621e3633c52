"""History: a run of any length keeps a bounded Temporal history and a transcript providers accept.

Guarantees: large payloads leave history for a content-addressed blob store
(`payload_storage`); a run hands over to a fresh execution when its history nears the
budget, decided from plain numbers (`budget`); old tool results are elided or compacted
(`compaction`); a transcript is validated and healed before every model request
(`healing`), and a call id an earlier turn used is qualified as its turn enters it
(`call_ids`).

Not guaranteed: that a blob outlives its store; the store's directory is the worker's to
keep. Only `payload_storage` imports temporalio (it is a Temporal storage driver); the rest
is pure.
"""
