"""Chain search attribute names, and the visibility queries that count chain runs. Pure.

The names and types are what a namespace must register (`CHAIN_SEARCH_ATTRIBUTES`);
the typed Temporal keys the workflow sets are built from them in
`steadyloop.chains.search_attributes`. The measurement activity
(`steadyloop.activities.chain_measurement`) runs the queries built here.

Query pitfalls handled here:

- **Quotes in ids.** A workflow id or tenant may contain `'`; pasted into a query it
  ends the string early (or injects a clause). Temporal's parser has no escape that
  round-trips every string: on the dev server `\\'` reads as `'`, but `\\\\` does not read
  as one backslash, a backslash before a quote cannot be written, and a `"` inside
  single quotes never matches. So `quoted` refuses `'`, `"`, `\\` and control
  characters (`UnquotableValue`) instead of building a query that silently matches
  nothing, and a run that delegates must not use them in its tenant or workflow id
  (checked when the run starts). Spaces, `%`, `_`, `|`, `;` and non-ASCII letters
  match exactly as written.
- **`!=` on a missing attribute.** A root has no `SteadyloopParent`, and
  `SteadyloopParent != 'x'` is false for it (SQL null semantics), so "not my child"
  must be `(SteadyloopParent IS NULL OR SteadyloopParent != 'x')`.
- **One run counted once per continue-as-new.** Every execution of a workflow id stays
  in visibility; the closed ones have status `ContinuedAsNew` and are excluded.
  (The running execution's `StartTime` is when it continued, so a run that continued
  inside a rate window counts as started in it: the count errs high, never low.)
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from steadyloop.errors import SteadyloopError

__all__ = [
    "AGENT",
    "CHAIN_ROOT",
    "CHAIN_SEARCH_ATTRIBUTES",
    "DEPTH",
    "PAIR",
    "PARENT",
    "TENANT",
    "UnquotableValue",
    "others_in_chain",
    "others_of_tenant",
    "quotable",
    "quoted",
]

TENANT = "SteadyloopTenant"
CHAIN_ROOT = "SteadyloopChainRoot"
PARENT = "SteadyloopParent"
DEPTH = "SteadyloopDepth"
AGENT = "SteadyloopAgent"
# The unordered pair (parent's agent, this run's agent) as `pair_key` spells it: one
# equality answers "did these two agents already work together in this chain".
PAIR = "SteadyloopPair"

# Name -> type as `temporal operator search-attribute create --type` and
# `temporal server start-dev --search-attribute NAME=TYPE` spell it.
CHAIN_SEARCH_ATTRIBUTES: dict[str, Literal["Keyword", "Int"]] = {
    TENANT: "Keyword",
    CHAIN_ROOT: "Keyword",
    PARENT: "Keyword",
    DEPTH: "Int",
    AGENT: "Keyword",
    PAIR: "Keyword",
}


class UnquotableValue(SteadyloopError, ValueError):
    """A value no visibility query can match exactly (see the module docstring)."""


_UNQUOTABLE = re.compile(r"['\"\\\x00-\x1f\x7f]")


def quotable(value: str) -> bool:
    """True when `value` can be matched exactly in a visibility query."""
    return _UNQUOTABLE.search(value) is None


def quoted(value: str) -> str:
    """`value` as a visibility-query string literal; `UnquotableValue` when it cannot be."""
    if not quotable(value):
        raise UnquotableValue(
            f"{value!r} contains a quote, a backslash or a control character, which a "
            "Temporal visibility query cannot match exactly"
        )
    return f"'{value}'"


def _not_me_nor_mine(me: str) -> str:
    return (
        f"WorkflowId != {quoted(me)} AND "
        f"({PARENT} IS NULL OR {PARENT} != {quoted(me)}) AND "
        "ExecutionStatus != 'ContinuedAsNew'"
    )


def others_in_chain(chain_root: str, me: str, *, pair: str | None = None) -> str:
    """Runs of the chain other than `me` and `me`'s children (of `pair` only, when given)."""
    query = f"{CHAIN_ROOT} = {quoted(chain_root)} AND {_not_me_nor_mine(me)}"
    if pair is not None:
        query += f" AND {PAIR} = {quoted(pair)}"
    return query


def others_of_tenant(
    tenant: str,
    me: str,
    *,
    running: bool = False,
    started_since: datetime | None = None,
) -> str:
    """The tenant's chain runs other than `me` and `me`'s children: running now, or
    started at or after `started_since` (tz-aware)."""
    query = f"{TENANT} = {quoted(tenant)} AND {_not_me_nor_mine(me)}"
    if running:
        query += " AND ExecutionStatus = 'Running'"
    if started_since is not None:
        if started_since.tzinfo is None:
            raise ValueError("started_since must be tz-aware (workflow time is UTC)")
        query += f" AND StartTime >= {quoted(started_since.isoformat())}"
    return query
