"""The dead man's switch of a server kb starts: run as `python -I -S reaper.py` (no kb
import, no site packages) with its stdin the read end of a pipe whose only write end kb
holds, in a process group of its own that the server then joins.

When the pipe reaches end of file — kb has exited, however it died: SIGKILL, the OOM
killer, a signal kb did not handle — the reaper sends SIGTERM to its whole group (the
server and every engine-core and worker child it spawned, since they inherit the group),
waits up to GRACE seconds for them to go, then SIGKILLs the group, itself included. A
normal stop is kb's own (kb/live/server.py): it SIGKILLs the group at its end, the reaper
with it.

A pipe rather than PR_SET_PDEATHSIG (prctl(2)): the death signal fires when the *thread*
that forked the child exits, and reaches only that direct child, not the engine's own
children; end of file on the pipe comes when the last process holding the write end is
gone (kb opens it close-on-exec, so no other child keeps it).
"""

from __future__ import annotations

import os
import signal
import sys
import time

GRACE = 30.0  # as long as kb's own stop waits after SIGTERM


def members(pgid: int) -> list[int]:
    """Live processes of group `pgid` other than this one (zombies do not count: a dead
    server waits there for its parent to reap it). Linux /proc; empty elsewhere."""
    out = []
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return out
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            out.append(pid)
    return out


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only kb's end of file (or SIGKILL) ends it
    pgid = os.getpgid(0)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.read(0, 4096):
        pass
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    main()
