"""Output: text a person is already reading is never shown twice.

Guarantees: forwarded output carries the values that say what was seen (`forwarding`), so
a retry after text was shown stops or continues instead of re-rendering; a follower reads
a run's forwarded output from outside as it streams (`follow`).

Not guaranteed: that a person saw what was forwarded; only that it was sent once. Only
`follow` imports temporalio (it is a Temporal client); `forwarding` is pure.
"""
