"""Reading the command line: every argument is text, every id and duration usable.

Shared by every `steadyloop` subcommand (`main`, `receipts`, `steering`, ...), so an
argument no later step could carry (bytes that are not text, an id Temporal or a
terminal would trip on) is a usage error that names
the argument (exit 2), never a traceback from wherever it first crossed a boundary.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import locale
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from steadyloop._run.bounds import identity_problem, text_problem
from steadyloop._worker.config import ConfigError

# Temporal's default limit on a workflow id (`limit.maxIDLength`).
MAX_WORKFLOW_ID_CHARS = 1000


class ArgumentParser(argparse.ArgumentParser):
    """argparse, refusing an argument that is not text before any command sees it.

    Python hands over command-line bytes that are not valid in the locale's encoding
    (`steadyloop run $'caf\\xe9'` in a UTF-8 locale) as lone surrogates, which no
    JSON encoder, Temporal payload or terminal takes: the obvious command fails with a
    traceback wherever the value first crosses one. Every string argument of every
    subcommand is parsed here (subparsers share this class), so each is either decoded
    faithfully (valid in the locale's own encoding, when Python read it as UTF-8) or
    refused as a usage error naming the argument (exit 2). Paths are left alone: a file
    name may be any bytes.
    """

    def error(self, message: str) -> NoReturn:
        """argparse's usage error, with a suggestion for a mistyped subcommand or choice."""
        super().error(message + _choice_suggestion(message))

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        # The subcommand's action is handed every argument after it; the subcommand's own
        # parser checks each against its own action, which names it.
        subcommand = isinstance(action, argparse._SubParsersAction)
        if action.type is not Path and not subcommand and isinstance(arg_string, str):
            arg_string = _decoded_argument(action, arg_string)
        return super()._get_value(action, arg_string)


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")


def _choice_suggestion(message: str) -> str:
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return ""
    choices = re.findall(r"'([^']*)'", found.group("choices"))
    suggestion = did_you_mean(found.group("given"), choices)
    return f"; {suggestion}" if suggestion else ""


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`did you mean 'run'?`, or "" when no known word is close."""
    close = difflib.get_close_matches(given, list(known), n=2, cutoff=0.6)
    if not close:
        return ""
    return "did you mean " + " or ".join(repr(word) for word in close) + "?"


def parse_arguments(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """`parser.parse_args(argv)`, but an unknown flag is refused by the subcommand it was
    given to, with its usage and the flag it most likely meant (`--max-trns`: did you mean
    `--max-turns`?). argparse before 3.14 suggests nothing, and reports a subcommand's
    unknown flag from the top-level parser, which knows none of its flags."""
    args, extras = parser.parse_known_args(argv)
    if not extras:
        return args
    command = _subcommand_parser(parser, getattr(args, "command", None)) or parser
    flags = [flag for flag in command._option_string_actions if flag.startswith("--")]
    notes = []
    for extra in extras:
        if extra.startswith("-"):
            suggestion = did_you_mean(extra.split("=", 1)[0], flags)
            if suggestion:
                notes.append(f"{extra}: {suggestion}")
    said = "; ".join(notes) if notes else f"`{command.prog} --help` lists its flags"
    command.error(f"unrecognized arguments: {' '.join(extras)}; {said}")


def _subcommand_parser(
    parser: argparse.ArgumentParser, command: str | None
) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            chosen: argparse.ArgumentParser = action.choices[command]
            return chosen
    return None


def _decoded_argument(action: argparse.Action, value: str) -> str:
    if text_problem(value) is None:
        return value
    try:  # the bytes as given (Python decoded them with surrogateescape)
        raw = os.fsencode(value)
    except UnicodeEncodeError:  # a surrogate no byte decodes to: not from a real command line
        raw = value.encode("utf-8", "backslashreplace")
    codeset = locale.nl_langinfo(locale.CODESET) if hasattr(locale, "nl_langinfo") else ""
    if codeset.replace("-", "").lower() in ("utf8", "ansi_x3.41968", "ascii"):
        codeset = ""  # nothing else to try: Python already read it that way
    if codeset:
        with contextlib.suppress(UnicodeDecodeError, LookupError):
            return raw.decode(codeset)
    encoding = f"UTF-8 (or {codeset}, this locale's encoding)" if codeset else "UTF-8"
    raise argparse.ArgumentError(
        action,
        f"is not valid {encoding} text: the bytes given are {raw!r}; pass it as UTF-8 "
        "(its characters cannot be sent to a model or stored in a run)",
    )


def workflow_id_argument(value: str) -> str:
    """A workflow id from the command line: usable in Temporal and in what is printed."""
    problem = identity_problem(value, max_chars=MAX_WORKFLOW_ID_CHARS)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"a workflow id {problem}")
    return value.strip()


def read_text_from(stdin: TextIO, what: str) -> str:
    """All of `stdin` (trailing line breaks dropped, as shell `$(...)` does), or a usage
    error naming `what` when it is not text in the locale's encoding."""
    try:
        return stdin.read().rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} from standard input is not valid {exc.encoding} text "
            f"(byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})"
        ) from None
