"""A child process that embeds a long-lived process's passages (a save's note) at the lowest CPU
priority, so that the searches' query embeddings neither wait for them nor share the cores with
them, and no thread of the parent runs at a priority that could hold Python's GIL for long.

``brainmap serve`` starts it once set up, ``brainmap mcp`` at its first save (that save is
embedded by the caller, as the child loads); it loads the same embedder and answers one
passage at a time over its stdin and stdout. When it has not answered
within the caller's patience (the machine busy with more than the parent's searches: a build,
say), it has died, or it cannot start, :meth:`PassageWorker.embed` gives None and the caller
embeds the passage itself. Run as ``python -m brainmap.passageworker SPEC``.
"""

from __future__ import annotations

import contextlib
import os
import select
import struct
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import numpy as np

# request: id, text length; answer: id, status (0: a vector follows, 1: an error message), length
_REQUEST = struct.Struct("<QI")
_ANSWER = struct.Struct("<QBI")
# How long a passage may take at the lowest priority before the caller embeds it itself
PATIENCE_S = 1.0
# After the worker died or failed to start, how long before another is started
RESTART_AFTER_S = 30.0
# Passages given up on that the child may still be embedding: past this many, the next ones
# are not sent (the caller embeds them) until it catches up, so that its pipe never fills
MAX_BEHIND = 2


class PassageWorker:
    """The parent's handle on the child process: thread-safe, one passage at a time."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.fallbacks = 0  # passages the caller had to embed itself (tests, benchmarks)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._pid = 0  # the process that started the child (a forked copy starts its own)
        self._next_id = 0
        self._unanswered = 0  # requests sent whose answer has not been read
        self._buffer = b""
        self._down_until = 0.0

    def start(self) -> None:
        """Start the child now (it loads the model meanwhile); a failure is remembered."""
        with self._lock:
            self._ensure_started()

    def embed(self, text: str, patience: float = PATIENCE_S) -> np.ndarray | None:
        """The passage's ``(dim,)`` vector, or None: the child did not answer within
        ``patience`` seconds, failed, or is not running (the caller then embeds it)."""
        import numpy as np

        with self._lock:
            running = self._process is not None and self._pid == os.getpid()
            process = self._ensure_started()
            if process is None or process.stdin is None or not running:
                self.fallbacks += 1  # not running, or just started: the model is loading
                return None
            try:
                self._read_ready(process)  # answers to passages given up on, if any came
                if self._unanswered >= MAX_BEHIND:
                    self.fallbacks += 1
                    return None
                self._next_id += 1
                request = self._next_id
                payload = text.encode("utf-8", "surrogatepass")
                process.stdin.write(_REQUEST.pack(request, len(payload)) + payload)
                process.stdin.flush()
                self._unanswered += 1
                deadline = time.monotonic() + patience
                while True:  # answers to passages given up on come first: skip them
                    answer, status, body = self._answer(process, deadline)
                    if answer == request:
                        break
            except TimeoutError:  # still embedding, at its priority: the caller goes on
                self.fallbacks += 1
                return None
            except (OSError, ValueError, EOFError):  # the child died or sent nonsense
                self._stop()
                self.fallbacks += 1
                return None
            if status != 0:
                self.fallbacks += 1
                return None
            return np.frombuffer(body, dtype=np.float32).copy()

    def close(self) -> None:
        """Stop the child (it also stops by itself when the parent's end of its stdin closes)."""
        with self._lock:
            self._stop()

    def _ensure_started(self) -> subprocess.Popen[bytes] | None:
        if self._process is not None and self._pid == os.getpid():
            if self._process.poll() is None:
                return self._process
            self._stop()
        if self._pid != os.getpid():
            self._process = None  # the parent's child: not ours to talk to or stop
        if time.monotonic() < self._down_until:
            return None
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "brainmap.passageworker", self.spec],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            self._down_until = time.monotonic() + RESTART_AFTER_S
            return None
        self._pid, self._buffer, self._unanswered = os.getpid(), b"", 0
        return self._process

    def _stop(self) -> None:
        process, self._process = self._process, None
        self._down_until = time.monotonic() + RESTART_AFTER_S
        if process is None or self._pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            process.wait(timeout=5)
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def _answer(self, process: subprocess.Popen[bytes], deadline: float) -> tuple[int, int, bytes]:
        """The next answer by ``deadline`` (TimeoutError, with what came so far kept)."""
        self._fill(process, _ANSWER.size, deadline)
        answer, status, length = _ANSWER.unpack_from(self._buffer)
        self._fill(process, _ANSWER.size + length, deadline)
        body = self._buffer[_ANSWER.size : _ANSWER.size + length]
        self._buffer = self._buffer[_ANSWER.size + length :]
        self._unanswered -= 1
        return answer, status, body

    def _read_ready(self, process: subprocess.Popen[bytes]) -> None:
        """Read the answers that have come in (to passages given up on) without waiting."""
        with contextlib.suppress(TimeoutError):
            while self._unanswered:
                self._answer(process, time.monotonic())

    def _fill(self, process: subprocess.Popen[bytes], size: int, deadline: float) -> None:
        """At least ``size`` bytes from the child's stdout in the buffer by ``deadline``
        (TimeoutError, else EOFError when it closed)."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        while len(self._buffer) < size:
            left = deadline - time.monotonic()
            if not select.select([fd], [], [], max(0.0, left))[0]:
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError
            self._buffer += chunk


def lowest_cpu_priority() -> None:
    """Let this process run only when the CPUs would otherwise idle (Linux's ``SCHED_IDLE``),
    else at the lowest nice value: the threads it starts later inherit it."""
    policy = getattr(os, "SCHED_IDLE", None)
    if policy is not None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy, os.sched_param(0))
            return
    with contextlib.suppress(OSError):
        os.nice(19)


def serve(spec: str, requests: BinaryIO, answers: BinaryIO) -> None:
    """The child's loop: a passage in, its vector (or an error message) out, until EOF."""
    lowest_cpu_priority()
    from brainmap.embedders import load_embedder

    try:
        embedder = load_embedder(spec)
        failure = ""
    except Exception as exc:  # every request then gets the reason
        failure = f"the embedder did not load: {exc}"
    while True:
        head = requests.read(_REQUEST.size)
        if len(head) < _REQUEST.size:
            return  # the parent closed its end: it is gone
        request, length = _REQUEST.unpack(head)
        text = requests.read(length).decode("utf-8", "surrogatepass")
        try:
            if failure:
                raise RuntimeError(failure)
            vector = embedder.passages([text])[0].astype("<f4").tobytes()
            answers.write(_ANSWER.pack(request, 0, len(vector)) + vector)
        except Exception as exc:  # reported to the parent, which embeds it itself
            message = str(exc).encode("utf-8", "replace")
            answers.write(_ANSWER.pack(request, 1, len(message)) + message)
        answers.flush()


if __name__ == "__main__":
    serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
