"""A child process that embeds a long-lived process's passages (a save's note) at the lowest CPU
priority, so that the searches' query embeddings neither wait for them nor share the cores with
them, and no thread of the parent runs at a priority that could hold Python's GIL for long.

``brainmap serve`` starts it once set up, ``brainmap mcp`` at its first save (that save is
embedded by the caller, as the child loads); it loads the same embedder and answers one
passage at a time over its stdin and stdout. When it has not answered within the caller's
patience (a machine busy with more than the parent's searches, or with them alone), has died,
hangs or cannot start, :meth:`PassageWorker.embed` gives None and the caller embeds the passage
itself. One that cannot load the model is given up for the process, with a warning. Its stderr
(and whatever a library prints) goes to ``logs/passageworker.log`` in the home. Run as
``python -m brainmap.passageworker SPEC``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

log = logging.getLogger("brainmap.passageworker")

# request: id, text length; answer: id, status, length of what follows
_REQUEST = struct.Struct("<QI")
_ANSWER = struct.Struct("<QBI")
_VECTOR, _FAILED, _NO_MODEL = 0, 1, 2  # answer statuses: a vector, an error, no model loaded
MAX_TEXT_BYTES = 64 * 1024  # a passage is at most MAX_EMBED_CHARS (6,000) characters
MAX_ANSWER_BYTES = 1 << 20  # a longer answer is nonsense: the stream is out of step
# How long a passage may take at the lowest priority before the caller embeds it itself
PATIENCE_S = 1.0
# After the worker died or was stopped, how long before another is started
RESTART_AFTER_S = 30.0
# Passages given up on that the child may still be embedding: past this many, the next ones
# are not sent (the caller embeds them) until it catches up, so that its pipe never fills
MAX_BEHIND = 2
# A child behind for this long is taken for hung: stopped, and another started later
HUNG_AFTER_S = 120.0


class PassageWorker:
    """The parent's handle on the child process: thread-safe, one passage at a time."""

    def __init__(self, spec: str, log_path: Path | None = None) -> None:
        """``log_path``: where the child's stderr goes (a traceback, a library's print);
        nowhere by default."""
        from brainmap.childprocess import Child

        self.spec = spec
        self.answered = 0  # passages the child embedded (tests, benchmarks)
        self.fallbacks = 0  # passages the caller had to embed itself
        self._lock = threading.Lock()
        self._child = Child("brainmap.passageworker", spec, log_path=log_path)
        self._next_id = 0
        self._unanswered = 0  # requests sent whose answer has not been read
        self._behind_since: float | None = None
        self._down_until = 0.0
        self._given_up = False  # the model does not load, or close() was called

    def start(self) -> None:
        """Start the child now (it loads the model meanwhile)."""
        with self._lock:
            self._ensure_started()

    def embed(self, text: str, patience: float | None = None) -> np.ndarray | None:
        """The passage's ``(dim,)`` vector, or None: the child did not answer within
        ``patience`` seconds (default :data:`PATIENCE_S`, waiting for an earlier caller
        included), failed, or is not running; the caller then embeds it."""
        deadline = time.monotonic() + (PATIENCE_S if patience is None else patience)
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            self.fallbacks += 1
            return None
        try:
            vector = self._embed(text, deadline)
        finally:
            self._lock.release()
        if vector is None:
            self.fallbacks += 1
        else:
            self.answered += 1
        return vector

    def close(self) -> None:
        """Stop the child for good (it also stops by itself when the parent's end of its
        stdin closes, the parent gone)."""
        with self._lock:
            self._given_up = True
            self._stop()

    def _embed(self, text: str, deadline: float) -> np.ndarray | None:
        import numpy as np

        running = self._child.running
        if not self._ensure_started() or not running:
            return None  # not running, or just started: the model is loading
        payload = text.encode("utf-8", "surrogatepass")
        if len(payload) > MAX_TEXT_BYTES:
            return None
        try:
            self._read_ready()  # answers to passages given up on, if any came
            if self._unanswered >= MAX_BEHIND:
                behind = time.monotonic() - (self._behind_since or time.monotonic())
                if behind > HUNG_AFTER_S:
                    log.warning(
                        "the passage worker answered nothing for %.0f s: restarting", behind
                    )
                    self._stop()
                return None
            self._next_id += 1
            request = self._next_id
            self._child.send(_REQUEST.pack(request, len(payload)) + payload, deadline)
            self._unanswered += 1
            if self._behind_since is None:
                self._behind_since = time.monotonic()
            while True:  # answers to passages given up on come first: skip them
                answer, status, body = self._answer(deadline)
                if answer == request:
                    break
            if status == _VECTOR:
                if not body or len(body) % 4:
                    raise ValueError("a vector of a partial number of floats")
                return np.frombuffer(body, dtype=np.float32).copy()
            message = body.decode("utf-8", "replace")
            if status == _NO_MODEL:  # it will not get better: embed here from now on
                log.warning("the passage worker gives up: %s", message)
                self._given_up = True
                self._stop()
            return None  # a failed embedding: the caller's own attempt reports it
        except TimeoutError:  # still embedding, at its priority: the caller goes on
            return None
        except (OSError, ValueError, EOFError) as exc:  # the child died or sent nonsense
            log.warning("the passage worker stopped: %s", exc or type(exc).__name__)
            self._stop()
            return None

    def _ensure_started(self) -> bool:
        if self._child.running:
            return True
        if self._child.process is not None:  # it ended, or is the child of a forked parent
            if self._child.owned:
                self._stop()
            else:
                self._child.stop()
        if self._given_up or time.monotonic() < self._down_until:
            return False
        if not self._child.start():
            self._down_until = time.monotonic() + RESTART_AFTER_S
            return False
        self._unanswered, self._behind_since = 0, None
        return True

    def _stop(self) -> None:
        self._child.stop()
        self._down_until = time.monotonic() + RESTART_AFTER_S

    def _answer(self, deadline: float) -> tuple[int, int, bytes]:
        """The next answer by ``deadline`` (TimeoutError, with what came so far kept)."""
        answer, status, length = _ANSWER.unpack(self._child.peek(_ANSWER.size, deadline))
        if length > MAX_ANSWER_BYTES or answer > self._next_id:
            raise ValueError("an answer out of step")
        body = self._child.take(_ANSWER.size + length, deadline)[_ANSWER.size :]
        self._unanswered = max(0, self._unanswered - 1)
        self._behind_since = time.monotonic() if self._unanswered else None
        return answer, status, body

    def _read_ready(self) -> None:
        """Read the answers that have come in (to passages given up on) without waiting."""
        with contextlib.suppress(TimeoutError):
            while self._unanswered > 0:
                self._answer(time.monotonic())


def lowest_cpu_priority() -> None:
    """Let this process run only when the CPUs would otherwise idle (Linux's ``SCHED_IDLE``,
    within its session's or cgroup's share), else at the lowest nice value: the threads it
    starts later inherit it."""
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
        failure = f"the embedder {spec!r} did not load: {exc}"
    while True:
        head = requests.read(_REQUEST.size)
        if len(head) < _REQUEST.size:
            return  # the parent closed its end: it is gone
        request, length = _REQUEST.unpack(head)
        text = requests.read(length).decode("utf-8", "surrogatepass")
        status, body = _NO_MODEL, failure.encode("utf-8", "replace")
        if not failure:
            try:
                status, body = _VECTOR, embedder.passages([text])[0].astype("<f4").tobytes()
            except Exception as exc:  # reported to the parent, which embeds it itself
                status, body = _FAILED, str(exc).encode("utf-8", "replace")
        answers.write(_ANSWER.pack(request, status, len(body)) + body)
        answers.flush()


def main() -> None:
    """``python -m brainmap.passageworker SPEC``: answer on what was stdout; whatever else
    writes to stdout (a library's print) goes to stderr instead of into the answers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the parent decides
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.argv[1], sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
