"""`steadyloop demo --scenario tour`, driven as a user would: the tour runs as a
subprocess, and every command it prints (`$ ...`) is run as a subprocess of its own, in
order, while the tour keeps its server up. What decides the outcome is checked on the
side effects (one refund, one charge) and on the runs' own words (the resumed run writes
only what the interrupted one had not shown)."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from steadyloop._cli.demo_tour_conversation import (
    REPORT_END,
    REPORT_PROMPT,
    TourProvider,
    report_word,
)
from steadyloop.testing import RecordedRequest

TOUR_GUARD_S = 300.0  # a hang guard, not a speed assertion
COMMAND_GUARD_S = 120.0


def _request(messages: list[dict[str, str]]) -> RecordedRequest:
    body = json.dumps({"model": "scripted-model", "messages": messages}).encode()
    return RecordedRequest(method="POST", path="/v1/chat/completions", headers=(), body=body)


def test_the_report_continues_after_the_last_word_shown_and_nothing_before_it() -> None:
    shown = " ".join(report_word(n) for n in range(23))
    response = TourProvider(pace_s=0)(
        _request(
            [
                {"role": "user", "content": REPORT_PROMPT},
                {"role": "assistant", "content": shown},
                {"role": "user", "content": "Your previous answer was cut off."},
            ]
        )
    )
    body = b"".join(p for p in response.parts if isinstance(p, bytes)).decode()
    assert '"content":"w23"' in body and '"content":" w22"' not in body
    assert REPORT_END.split()[-1] in body


@pytest.mark.slow
def test_the_tour_stops_for_each_printed_command_and_each_works(tmp_path: Path) -> None:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "STEADYLOOP_", "TEMPORAL_"))
    }
    environment["PYTHONUNBUFFERED"] = "1"
    tour = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "steadyloop",
            "demo",
            "--scenario",
            "tour",
            "--workdir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        start_new_session=True,  # its dev server and workers too, to end them all on failure
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert tour.stdout is not None
        for line in tour.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    ran: list[tuple[list[str], subprocess.CompletedProcess[str]]] = []
    give_up = time.monotonic() + TOUR_GUARD_S
    try:
        while True:
            line = lines.get(timeout=max(1.0, give_up - time.monotonic()))
            if line is None:
                break
            seen.append(line)
            if not line.startswith("    $ "):
                continue
            words = shlex.split(line.removeprefix("    $ "))
            done = subprocess.run(
                words,
                capture_output=True,
                text=True,
                env=environment,
                timeout=COMMAND_GUARD_S,
                check=False,
            )
            ran.append((words, done))
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}\n" + "\n".join(seen)
        code = tour.wait(timeout=30)
    finally:
        if tour.poll() is None:
            os.killpg(tour.pid, signal.SIGKILL)
            tour.wait()
    out = "\n".join(seen)
    assert code == 0, out

    # Every command the issue names, in the order the tour asked for them, each typed as
    # printed (the tour's own program name, its dev server's address).
    commands = [_subcommand(words) for words, _ in ran]
    assert commands == [
        "send",
        "approve",
        "approve",
        "interrupt",
        "resume",
        "receipts",
        "receipts",
    ], out
    address = re.search(r"Temporal dev server\s+(\S+)", out)
    assert address is not None
    assert all(words[-2:] == ["--address", address.group(1)] for words, _ in ran)

    # 1. the approval: the message reached the model, the refund ran once.
    assert "1 call waits for approval" in ran[1][1].stdout
    assert "approved 'refund' call 'call_refund'" in ran[2][1].stdout
    assert 'You also said "Also email Ana a prepaid return label."' in out
    refunds = (tmp_path / "outbox" / "refunds.txt").read_text().splitlines()
    assert refunds == ["refund 3450 cents on A-17"]

    # 2. interrupted mid-report, resumed from the last word shown, nothing shown twice.
    assert "stopped" in ran[3][1].stdout and "interrupted" in ran[3][1].stdout
    shown = re.search(r"words had been shown; .* ending \.\.\.'(.*)'$", out, re.MULTILINE)
    rest = re.search(r"it wrote only the rest: '(\S+)", out)
    assert shown is not None and rest is not None, out
    last_shown = shown.group(1).split()[-1]
    assert _number(rest.group(1)) == _number(last_shown) + 1, (last_shown, rest.group(1))
    assert REPORT_END in ran[4][1].stdout

    # 3. the crash: one charge, the call ambiguous until resolved, never run again.
    assert re.search(r"then it died \(exit -9, SIGKILL\)", out), out
    assert 'ambiguous: charge {"order_id":"B-02","cents":2999}' in out
    assert "charge" in ran[5][1].stdout and "B-02" in ran[5][1].stdout
    charges = (tmp_path / "outbox" / "charges.txt").read_text().splitlines()
    assert charges == ["charge 2999 cents on B-02"]
    assert "answer: Charge of B-02: charged 2999 cents on B-02 (checked with the bank)." in out


def _subcommand(words: list[str]) -> str:
    after = words[words.index("steadyloop") + 1 :] if "steadyloop" in words else words[1:]
    return after[0]


def _number(word: str) -> int:
    return int(word.strip("[]w.,'"))
