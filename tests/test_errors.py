"""One error family: every exception steadyloop defines is a `SteadyloopError`, each name
is used once, and every `ApplicationError` type comes from `steadyloop.errors`."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections import Counter
from pathlib import Path

import pytest

import steadyloop
from steadyloop import errors
from steadyloop.errors import SteadyloopError

PACKAGE = Path(steadyloop.__file__).parent


def defined_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(steadyloop.__path__, "steadyloop."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_exception_is_a_steadyloop_error_with_a_name_of_its_own() -> None:
    classes = defined_exceptions()
    assert len(classes) > 40  # the walk found the package's exceptions
    outside = [cls for cls in classes if not issubclass(cls, SteadyloopError)]
    assert outside == []
    names = Counter(cls.__name__ for cls in classes)
    assert [name for name, count in names.items() if count > 1] == []


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("steadyloop.events.InvalidCursor", ValueError),
        ("steadyloop.tools._registry.UnknownToolError", LookupError),
        ("steadyloop.testing.ScriptExhausted", AssertionError),
        ("steadyloop.testing.NothingWaits", AssertionError),
    ],
)
def test_an_error_keeps_the_builtin_kind_callers_catch(name: str, builtin: type) -> None:
    module, _, attribute = name.rpartition(".")
    cls = getattr(importlib.import_module(module), attribute)
    assert issubclass(cls, SteadyloopError) and issubclass(cls, builtin)


def _inline_types(tree: ast.AST) -> list[int]:
    """Lines of `ApplicationError(..., type="literal")` calls in one module."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name != "ApplicationError":
            continue
        for keyword in node.keywords:
            if keyword.arg == "type" and isinstance(keyword.value, ast.Constant):
                lines.append(node.lineno)
    return lines


def test_no_application_error_type_is_written_at_its_raise_site() -> None:
    inline = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _inline_types(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert inline == {}


def test_the_inline_check_finds_a_literal_type() -> None:
    written = 'raise ApplicationError("no", type="Refused")\nraise x.ApplicationError(type="B")'
    assert _inline_types(ast.parse(written)) == [1, 2]
    assert _inline_types(ast.parse('raise ApplicationError("no", type=REFUSED)')) == []


def test_each_application_error_type_is_one_distinct_string() -> None:
    types = {
        name: value
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, str)
    }
    assert len(types) >= 15
    assert len(set(types.values())) == len(types)
    assert set(types.values()) >= errors.CONFIGURATION_ERROR_TYPES


def _drawn(text: str) -> set[str]:
    """The class names a drawn tree holds (the first word after the branch marks)."""
    return set(re.findall(r"^\s*(?:[│ ]*[├└]── )?([A-Z]\w+)", text, re.MULTILINE))


def test_the_drawn_family_is_every_public_exception_and_the_docs_draw_the_same() -> None:
    doc = errors.__doc__ or ""
    drawing = doc[doc.index("    SteadyloopError") : doc.index("\nThe loop's `Stop`")]
    public = {cls.__name__ for cls in defined_exceptions() if not cls.__name__.startswith("_")}
    assert _drawn(drawing) == public
    page = (PACKAGE.parent / "docs" / "client.md").read_text(encoding="utf-8")
    lines = [line[4:] for line in drawing.strip("\n").splitlines()]
    assert "\n".join(lines) in page
