"""docs/client.md's "Every run option" names every setting a run takes, so a field added
to the models without a line in the docs fails here, and every class the section tells a
user to construct is importable from the public package."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

import steadyloop.delegation
from steadyloop import (
    ContinuationOptions,
    ForwardingOptions,
    OutputType,
    RunLimits,
    RunOptions,
    RunPlugins,
    Sampling,
)

PAGE = Path(__file__).resolve().parent.parent / "docs" / "client.md"


def section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Every run option")
    return text[start : text.index("\n## ", start + 1)]


def named(text: str) -> set[str]:
    return set(re.findall(r"`([a-z_]+)`", text))


def test_every_field_of_every_run_model_is_documented() -> None:
    documented = named(section())
    models: list[type[BaseModel]] = [
        RunOptions,
        RunLimits,
        Sampling,
        ContinuationOptions,
        ForwardingOptions,
        RunPlugins,
        OutputType,
    ]
    missing = {
        f"{model.__name__}.{field}"
        for model in models
        for field in model.model_fields
        if field not in documented
    }
    assert missing == set()


def test_every_class_the_section_names_is_public() -> None:
    classes = set(re.findall(r"`([A-Z][A-Za-z]+)`", section())) - {"True", "None"}
    assert classes >= {"RunLimits", "Sampling", "RouteConfig", "Price", "CompactionPolicy"}
    public = set(steadyloop.__all__) | set(steadyloop.delegation.__all__) | {"RunStats"}
    assert classes - public == set()
