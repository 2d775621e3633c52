"""History: a run of any length keeps a bounded Temporal history and a transcript providers accept.

Guarantees: large payloads leave history for a content-addressed blob store
(`payload_storage`), kept in an object store (`object_store`: a local directory, memory,
or S3-compatible storage through `bucket_store`), from which `steadyloop blobs gc`
(`steadyloop.client._blob_gc`) deletes what runs closed longer than a retention period
stored, by the rules of `blob_retention`; a run hands over to a fresh execution when its
history nears the budget, decided from plain numbers (`budget`); old tool results are
elided or compacted (`compaction`); a transcript is validated and healed before every
model request (`healing`),
and a call id an earlier turn used is qualified as its turn enters it (`call_ids`).

Not guaranteed: that a blob outlives its store; the store is the deployment's to keep.
Only `payload_storage` imports temporalio (it is a Temporal storage driver), and only
`object_store` and `bucket_store` do I/O besides it; the rest is pure.
"""
