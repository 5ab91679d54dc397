"""What the tests read of other processes in Linux's /proc: the helper processes a server
starts, their priority, CPU time and end."""

from __future__ import annotations

import time
from pathlib import Path


def pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def cmdline(pid: int) -> str:
    """The command line, its arguments each followed by a space ("" once it has gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def environ(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def parent(pid: int) -> int:
    try:
        return int(stat(pid)[1])
    except (OSError, ValueError, IndexError):
        return 0


def nice(pid: int) -> int:
    return int(stat(pid)[16])


def cpu_ticks(pid: int) -> int:
    """The CPU time (user + system, in clock ticks) ``pid`` has used."""
    fields = stat(pid)
    return int(fields[11]) + int(fields[12])


def settled(pid: int, timeout: float = 60) -> int:
    """``pid``'s CPU ticks once it stopped using the CPU (it has loaded its model)."""
    deadline = time.monotonic() + timeout
    busy = -1
    while (ticks := cpu_ticks(pid)) != busy:
        assert time.monotonic() < deadline, f"process {pid} never settled"
        busy = ticks
        time.sleep(0.5)
    return ticks


def running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting to be reaped has ended)."""
    try:
        return stat(pid)[0] != "Z"
    except OSError:
        return False


def writer_of(home: Path) -> int:
    """The pid of the one writer process of ``home`` (a server's), once it runs."""
    deadline = time.monotonic() + 60
    while True:
        found = [p for p in pids() if f" brainmap.ops.writer {home} " in cmdline(p)]
        if len(found) == 1:
            return found[0]
        assert time.monotonic() < deadline, f"no writer process: {found}"
        time.sleep(0.1)
