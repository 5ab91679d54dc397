"""How brainmap starts a Python helper process of its own (the read worker, the passage and
write workers) and speaks to it."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("brainmap.childprocess")


def python_module(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``python -m module args`` with this process's
    interpreter and this very brainmap (wherever it was imported from), and without the
    working directory on the module path (``-P``), where a stray ``numpy.py`` would win."""
    import brainmap

    env = dict(os.environ)
    here = str(Path(brainmap.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-P", "-m", module, *args], env


class Child:
    """A helper process of ours (``python -m module args``) spoken to over its stdin and
    stdout, every read and write bounded by a deadline. Not thread-safe: its owner locks.

    Its stderr (a traceback, a library's print) goes to ``log_path``, nowhere without one.
    A child belongs to the process that started it: a forked copy of the owner sees none.
    """

    def __init__(self, module: str, *args: str, log_path: Path | None = None) -> None:
        self.module = module
        self.args = args
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._pid = 0  # the process that started the child
        self._buffer = b""

    @property
    def owned(self) -> bool:
        """Whether a child was started, by this very process (not a forked parent)."""
        return self.process is not None and self._pid == os.getpid()

    @property
    def running(self) -> bool:
        """Whether this process's child is alive."""
        return self.owned and self.process is not None and self.process.poll() is None

    def start(self) -> bool:
        """Start the child (after stopping one that ended); False when it cannot start."""
        if self.running:
            return True
        self.stop()
        command, env = python_module(self.module, *self.args)
        try:
            with contextlib.ExitStack() as stack:
                errors: BinaryIO | int = subprocess.DEVNULL
                if self.log_path is not None:
                    self.log_path.parent.mkdir(parents=True, exist_ok=True)
                    errors = stack.enter_context(open(self.log_path, "ab"))
                self.process = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
                    env=env,
                )  # fmt: skip
        except OSError as exc:
            log.warning("%s could not start: %s", self.module, exc)
            return False
        assert self.process.stdin is not None
        os.set_blocking(self.process.stdin.fileno(), False)  # a write never outlasts a deadline
        self._pid, self._buffer = os.getpid(), b""
        return True

    def stop(self, grace_s: float = 0.0) -> None:
        """Stop the child: close its stdin (it ends by itself at EOF), give it ``grace_s``
        seconds to finish, then kill it. A child of another process is only forgotten."""
        owned, process, self.process = self.owned, self.process, None
        if process is None or not owned:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            process.wait(timeout=5)
        with contextlib.suppress(OSError):
            if process.stdout is not None:
                process.stdout.close()

    def kill(self) -> None:
        """Kill the child now (from any thread) and reap it; what it wrote stays readable
        until :meth:`stop`."""
        process = self.process
        if process is not None and self.owned:
            with contextlib.suppress(OSError):
                process.kill()
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                process.wait(timeout=5)

    def send(self, data: bytes, deadline: float) -> None:
        """Write all of ``data`` by ``deadline``. Nothing written: TimeoutError (nothing was
        sent); part of it: OSError (the stream is out of step: stop the child)."""
        assert self.process is not None and self.process.stdin is not None
        fd = self.process.stdin.fileno()
        sent = 0
        while sent < len(data):
            if not _ready(fd, select.POLLOUT, deadline):
                if sent:
                    raise OSError("a request was cut short")
                raise TimeoutError
            sent += os.write(fd, data[sent:])

    def peek(self, size: int, deadline: float) -> bytes:
        """The next ``size`` bytes the child wrote, left unread: by ``deadline`` (else
        TimeoutError, what came so far kept), EOFError when it closed its end first."""
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while len(self._buffer) < size:
            if not _ready(fd, select.POLLIN, deadline):
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError(f"{self.module} ended")
            self._buffer += chunk
        return self._buffer[:size]

    def take(self, size: int, deadline: float) -> bytes:
        """As :meth:`peek`, and read."""
        data = self.peek(size, deadline)
        self._buffer = self._buffer[size:]
        return data


def _ready(fd: int, event: int, deadline: float) -> bool:
    """Whether ``fd`` is ready for ``event`` (or closed) by ``deadline``."""
    poller = select.poll()  # not select.select: descriptors past 1023 are fine
    poller.register(fd, event)
    return bool(poller.poll(max(0, int((deadline - time.monotonic()) * 1000))))
