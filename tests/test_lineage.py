"""Lineage arithmetic: null means me, a first child adopts its parent as root, depth counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from steadyloop._chains.lineage import Lineage, descend_chain


def test_a_root_has_no_root_and_no_parent_and_is_its_own_root() -> None:
    root = Lineage()
    assert (root.root_id, root.parent_id, root.depth) == (None, None, 0)
    assert root.is_root
    assert root.root_of("run-1") == "run-1"


def test_a_first_generation_child_adopts_its_parents_id_as_root() -> None:
    child = descend_chain(Lineage(), "root-run")
    assert (child.root_id, child.parent_id, child.depth) == ("root-run", "root-run", 1)
    assert not child.is_root
    assert child.root_of("child-run") == "root-run"


def test_a_grandchild_keeps_the_root_and_names_its_own_parent() -> None:
    child = descend_chain(Lineage(), "r")
    grandchild = descend_chain(child, "c")
    assert (grandchild.root_id, grandchild.parent_id, grandchild.depth) == ("r", "c", 2)


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=12))
def test_depth_counts_generations_and_the_root_never_changes(ids: list[str]) -> None:
    lineage = Lineage()
    for parent in ids:
        lineage = descend_chain(lineage, parent)
    assert lineage.depth == len(ids)
    assert lineage.root_id == ids[0]
    assert lineage.parent_id == ids[-1]


@pytest.mark.parametrize(
    "fields",
    [
        {"root_id": "r"},
        {"parent_id": "p"},
        {"depth": 1},
        {"root_id": "r", "parent_id": "p", "depth": 0},
        {"root_id": "r", "parent_id": "p", "depth": 1},  # a first child's root is its parent
        {"root_id": "", "parent_id": "", "depth": 2},
        {"depth": -1},
    ],
)
def test_an_inconsistent_lineage_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Lineage.model_validate(fields)


def test_a_child_of_an_unnamed_parent_is_refused() -> None:
    with pytest.raises(ValueError, match="parent id"):
        descend_chain(Lineage(), "")


def test_lineage_round_trips_as_json() -> None:
    lineage = descend_chain(descend_chain(Lineage(), "r"), "c")
    assert Lineage.model_validate_json(lineage.model_dump_json()) == lineage
