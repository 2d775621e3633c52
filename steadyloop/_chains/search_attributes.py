"""The chain search attributes as Temporal keys, and the attributes of one run.

No I/O. The workflow sets them (a child at its start, a delegating root by upserting
them once); names and types live in the pure `steadyloop._chains.queries`. A Temporal
namespace must have them registered before a run that delegates starts: the embedded
dev server (`CHAIN_SEARCH_ATTRIBUTE_KEYS`) and docker-compose.yml register them, other
clusters with `temporal operator search-attribute create` (see `CHAIN_SEARCH_ATTRIBUTES`).
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from steadyloop._chains import queries as names

__all__ = [
    "AGENT",
    "CHAIN_ROOT",
    "CHAIN_SEARCH_ATTRIBUTE_KEYS",
    "DEPTH",
    "PAIR",
    "PARENT",
    "TENANT",
    "chain_search_attributes",
]

TENANT = SearchAttributeKey.for_keyword(names.TENANT)
CHAIN_ROOT = SearchAttributeKey.for_keyword(names.CHAIN_ROOT)
PARENT = SearchAttributeKey.for_keyword(names.PARENT)
DEPTH = SearchAttributeKey.for_int(names.DEPTH)
AGENT = SearchAttributeKey.for_keyword(names.AGENT)
PAIR = SearchAttributeKey.for_keyword(names.PAIR)
CHAIN_SEARCH_ATTRIBUTE_KEYS: tuple[SearchAttributeKey[str] | SearchAttributeKey[int], ...] = (
    TENANT,
    CHAIN_ROOT,
    PARENT,
    DEPTH,
    AGENT,
    PAIR,
)


def chain_search_attributes(
    *,
    tenant: str,
    chain_root: str,
    depth: int,
    agent: str,
    parent: str | None = None,
    pair: str | None = None,
) -> TypedSearchAttributes:
    """The attributes of one run; a root has no parent and no pair."""
    pairs: list[SearchAttributePair[str] | SearchAttributePair[int]] = [
        SearchAttributePair(TENANT, tenant),
        SearchAttributePair(CHAIN_ROOT, chain_root),
        SearchAttributePair(DEPTH, depth),
        SearchAttributePair(AGENT, agent),
    ]
    if parent is not None:
        pairs.append(SearchAttributePair(PARENT, parent))
    if pair is not None:
        pairs.append(SearchAttributePair(PAIR, pair))
    return TypedSearchAttributes(pairs)
