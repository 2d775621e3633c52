"""Chain search attribute names, and quoting a value into a visibility query. Pure.

The names and types are what a namespace must register (`CHAIN_SEARCH_ATTRIBUTES`);
the typed Temporal keys the workflow sets are built from them in
`steadyloop._chains.search_attributes`. The attributes are for listing and searching a
tenant's or a chain's runs (`temporal workflow list --query "SteadyloopChainRoot = 'x'"`);
the counts admission reads are kept by the admission ledger, not queried.

**Quotes in ids.** A workflow id or tenant may contain `'`; pasted into a query it
ends the string early (or injects a clause). Temporal's parser has no escape that
round-trips every string: on the dev server `\\'` reads as `'`, but `\\\\` does not read
as one backslash, a backslash before a quote cannot be written, and a `"` inside
single quotes never matches. So `quoted` refuses `'`, `"`, `\\` and control
characters (`UnquotableValue`) instead of building a query that silently matches
nothing, and a run that delegates must not use them in its tenant or workflow id
(checked when the run starts), so its runs can always be found. Spaces, `%`, `_`, `|`,
`;` and non-ASCII letters match exactly as written.
"""

from __future__ import annotations

import re
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
