"""Output: text a person is already reading is never shown twice, and a typed answer is
the JSON its schema accepts.

Guarantees: forwarded output carries the values that say what was seen (`forwarding`), so
a retry after text was shown stops or continues instead of re-rendering. A follower
reads it from outside as part of the run's event log (`steadyloop.client._event_log`).
A typed run's final answer is checked against its schema without ever raising, and what
is wrong with it is a sentence the model can act on (`typed`).

Not guaranteed: that a person saw what was forwarded; only that it was sent once. Pure:
nothing here imports temporalio.
"""
