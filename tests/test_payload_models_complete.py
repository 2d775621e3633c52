"""Every payload model is complete when a worker has imported it, before any run.

A pydantic model that names a type defined after it is completed at its first use. In a
worker that first use can be Temporal decoding a run's input inside the workflow
sandbox, where completing it failed ("`TypeAdapter[RunInput]` is not fully defined") once
the workflow module was passed through the sandbox. So the models complete at import, and
this checks it in a fresh interpreter that imports what `steadyloop worker` imports.
"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import pydantic
import steadyloop._cli.main  # what `steadyloop worker` imports

incomplete = sorted(
    f"{module.__name__}.{name}"
    for module in list(sys.modules.values())
    if getattr(module, "__name__", "").startswith("steadyloop")
    for name, value in vars(module).items()
    if isinstance(value, type)
    and issubclass(value, pydantic.BaseModel)
    and value.__module__ == module.__name__
    and not value.__pydantic_generic_metadata__.get("parameters")
    and not value.__pydantic_complete__
)
print(incomplete)
"""


def test_no_payload_model_is_left_to_complete_at_first_use() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout
