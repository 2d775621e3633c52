"""Lineage: whose chain a run belongs to. Pure, no I/O.

A *chain* is the tree of runs spawned from one root run; a run's *lineage* is its
root id, its parent id and its depth. What the obvious version gets wrong:

- **Storing the root's own id as its root.** A root does not know its workflow id
  when its input is written (the caller may let Temporal pick it), and a copy of the
  id in the input goes stale when the run is restarted under another id. A root's
  `root_id` and `parent_id` are null, read as "null means me" (`Lineage.root_of`).
- **A first-generation child copying its parent's (null) root.** It would claim to be
  a root. `descend_chain` adopts the parent's *id* as root when the parent is a root.
- **Depth counted from 1, or left to the caller.** The root is depth 0 and each
  generation adds exactly one, in `descend_chain` only, so "how deep may a chain go"
  has one reading.
- **Inconsistent triples** (a parent without a root, a root at depth 2): refused when
  the model is built, so a bad lineage cannot reach a depth or budget decision.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Lineage", "descend_chain"]


class Lineage(BaseModel):
    """A run's place in its chain: `Lineage()` is a root (root and parent null, depth 0)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root_id: str | None = Field(default=None, min_length=1)
    parent_id: str | None = Field(default=None, min_length=1)
    depth: int = Field(default=0, ge=0, strict=True)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        is_root = self.root_id is None and self.parent_id is None and self.depth == 0
        is_child = self.root_id is not None and self.parent_id is not None and self.depth >= 1
        if not (is_root or is_child):
            raise ValueError(
                "a lineage is a root (root_id and parent_id null, depth 0) or a child "
                f"(root_id and parent_id set, depth >= 1); got {self!r}"
            )
        if self.depth == 1 and self.root_id != self.parent_id:
            raise ValueError("a first-generation child's root is its parent")
        return self

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    def root_of(self, own_id: str) -> str:
        """The chain's root id, for a run whose own workflow id is `own_id`."""
        return own_id if self.root_id is None else self.root_id


def descend_chain(parent_lineage: Lineage, parent_id: str) -> Lineage:
    """The lineage of a child started by the run `parent_id` whose lineage is `parent_lineage`."""
    if not parent_id:
        raise ValueError("a child's parent id must not be empty")
    return Lineage(
        root_id=parent_lineage.root_of(parent_id),
        parent_id=parent_id,
        depth=parent_lineage.depth + 1,
    )
