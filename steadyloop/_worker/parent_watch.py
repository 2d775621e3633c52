"""Run a command that dies with the process that started this one.

`python parent_watch.py PARENT_PID COMMAND [ARGS...]` runs COMMAND as its child and
ends it when PARENT_PID is gone. It is how the embedded dev server (`temporal server
start-dev`) dies with `steadyloop worker --dev`, `demo` or `serve --dev` even when they
are SIGKILLed: without it the server was re-parented to PID 1, kept its port, and the
same command then failed with "port ... is in use".

Why a process between the two, rather than `PR_SET_PDEATHSIG` on the server itself:
the server is spawned by the SDK's Rust core, from one of its threads, and the death
signal fires when the *thread* that forked exits, not the process: a runtime thread
that retires would kill a healthy server. Here the ways out are covered one by one:

- the launcher dies (SIGKILL included): this process is re-parented, `os.getppid()`
  changes, and the child is stopped (SIGTERM, then SIGKILL after `STOP_GRACE_S`);
- this process is killed (the SDK stops its server with SIGKILL): on Linux the child
  was started with `PR_SET_PDEATHSIG` from this process's only thread, which lives
  exactly as long as this process, so the kernel kills the child with it;
- SIGTERM, SIGINT or SIGHUP: passed on to the child, whose exit status is this one's;
- the child exits: so does this process, with its status.

Standard library only, run by path (`python -I`), so starting it costs no import of
steadyloop or temporalio.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from types import FrameType

POLL_S = 0.2  # how soon the launcher's death is noticed
STOP_GRACE_S = 5.0  # how long the child may take to stop on SIGTERM before SIGKILL
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with(watch: int) -> None:
    """In the child, before exec: the kernel sends SIGKILL when this process ends.

    Had it ended already (between the fork and the prctl), no signal would come: the
    child checks its parent once the signal is armed, and ends itself if it is gone.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != watch:
        os._exit(1)


def _stop(child: subprocess.Popen[bytes]) -> int:
    child.terminate()
    try:
        return child.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait()


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        print("usage: parent_watch.py PARENT_PID COMMAND [ARGS...]", file=sys.stderr)
        return 2
    parent = int(argv[0])
    if os.getppid() != parent:  # already gone (or started by someone else)
        return 1
    linux = sys.platform.startswith("linux")
    me = os.getpid()
    child = subprocess.Popen(argv[1:], preexec_fn=(lambda: _die_with(me)) if linux else None)

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    while True:
        try:
            return child.wait(POLL_S)
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != parent:  # the launcher died: nothing will stop the child
            _stop(child)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
