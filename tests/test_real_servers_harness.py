"""The real-server tests skip on a developer's machine without their packages, and
fail in CI instead, so a CI that lost its install step cannot pass by running nothing."""

from __future__ import annotations

import pytest
from real_servers import require_modules

MISSING = "no_such_package_for_steadyloop"


def test_a_missing_package_skips_on_a_developers_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        require_modules("json", MISSING)


def test_a_missing_package_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=f"CI runs the real-server tests.*{MISSING}"):
        require_modules(MISSING)
    require_modules("json")  # present: nothing to say
