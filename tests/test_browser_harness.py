"""The browser the web page's tests drive: it launches, and its absence fails loudly."""

from __future__ import annotations

import pytest
from browser_harness import CHROMIUM_ENV, INSTALL_HINT, chromium, chromium_path


def test_a_missing_chromium_fails_the_test_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CHROMIUM_ENV, "/nonexistent/chromium")
    with pytest.raises(pytest.fail.Exception) as failed:
        chromium_path()
    assert str(failed.value) == INSTALL_HINT
    assert "apt-get install -y chromium" in INSTALL_HINT


@pytest.mark.slow
async def test_the_system_chromium_runs_a_page_script() -> None:
    async with chromium() as browser:
        page = await browser.new_page()
        await page.set_content("<p id=out></p><script>out.textContent = 'ran ' + 6 * 7</script>")
        assert await page.text_content("#out") == "ran 42"
