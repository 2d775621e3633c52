"""One readable line from a chain of exceptions, for the command line's error messages.

Temporal wraps the cause a person needs (the provider said 429, the key was refused)
in several layers whose own text only says which call failed; this joins them,
outermost first, without repeating a message.
"""

from __future__ import annotations


def failure_text(error: BaseException) -> str:
    messages: list[str] = []
    cause: BaseException | None = error
    while cause is not None:
        text = str(cause).strip()
        if text and text not in messages:
            messages.append(text)
        cause = cause.__cause__
    return ": ".join(messages) or type(error).__name__
