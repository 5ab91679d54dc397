"""A child process that runs a server's note writes (save, ingest, supersede, verify: the ops
marked ``handed``) at the lowest CPU priority, so that a client saving while others search
takes nothing from their share of the cores: not the write, not the indexing, not the
embedding, not the library map's refresh after it.

``brainmap serve`` starts it once set up (``Brain.serve_writes(hand_writes=True)``). The child
opens the same home and runs each op as the server would have (``brainmap.ops.writer``); the
server's searches see the write through the index, as they see a CLI's. Writes go one at a
time, and each waits for its answer: a client that gets its reply finds the note in the next
search.

The child runs at nice 19, not ``SCHED_IDLE`` like the passage worker: it holds the index's
write lock while it writes, and a process that may get no CPU at all while others hold the
cores would hold up every other writer (a hook, the CLI) for as long. When the child is not
running (it cannot start, has not loaded yet, died, hung) or is busy with other writes for
long, :meth:`WriteWorker.run` raises :class:`Unavailable` before the child took the write
(it says so before it runs it) and the server writes itself; a child that dies or hangs
during a write is stopped and the client told that the write may not have finished. Frames
are a 4-byte length and a JSON object, both ways.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, BinaryIO

from brainmap.errors import UserError

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger("brainmap.writeworker")

_LENGTH = struct.Struct("<I")
MAX_FRAME_BYTES = 64 << 20  # a longer frame is nonsense: the stream is out of step
# How long a write may take before the child is taken for hung and stopped. At nice 19 on
# cores the searches keep busy, a save's ~150 ms of CPU has taken up to a few seconds
HUNG_AFTER_S = 120.0
# How long a write waits for the child to finish the writes before it, or to load, before
# the server writes it itself: a burst of saves, or one waiting for a library's lock or a
# slow reasoner, holds up the others no longer than this
QUEUE_PATIENCE_S = 2.0
READY_PATIENCE_S = 2.0
# After the child died or was stopped, how long the server writes itself before another starts
RESTART_AFTER_S = 30.0
# How long the child may take to refresh the library map and exit when the server stops
CLOSE_GRACE_S = 15.0


class Unavailable(Exception):
    """No child took the write (it wrote nothing): the caller runs it itself."""


class WriteFailed(RuntimeError):
    """The child's write failed unexpectedly (its traceback is in the child's log);
    ``kind`` names the exception it raised there."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class WriteWorker:
    """The server's handle on the child: thread-safe, one write at a time."""

    def __init__(self, home: Path, log_path: Path | None = None, *, patience_s: float = 0) -> None:
        """``patience_s``: how long a write may take before the child is taken for hung
        (at least :data:`HUNG_AFTER_S`; a save that asks a slow reasoner needs more)."""
        from brainmap.childprocess import Child

        self.handed = 0  # writes the child ran (tests, benchmarks)
        self.patience_s = max(HUNG_AFTER_S, patience_s)
        self._lock = threading.Lock()
        self._home = home
        self._child = Child("brainmap.ops.writer", str(home), log_path=log_path)
        self._next_id = 0
        self._ready = False  # the child said it has opened the home
        self._unsettled = False  # it wrote since the map was last settled
        self._down_until = 0.0
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        process = self._child.process
        return process.pid if process is not None and self._child.running else None

    def start(self) -> None:
        """Start the child now (it opens the home and loads the model meanwhile)."""
        with self._lock:
            self._ensure_started()

    def run(self, op: str, data: dict[str, Any], caller: str, view: list[str] | None) -> Any:
        """The JSON output of op ``op`` run by the child on input ``data`` for ``caller``,
        seeing the libraries ``view`` (None: all). Raises :class:`Unavailable` when no child
        took it (it wrote nothing), the op's :class:`UserError` as the child raised it,
        :class:`WriteFailed` for any other error there, and :class:`UserError` (503) when the
        child died or hung during the write."""
        request = {"op": op, "input": data, "caller": caller, "view": view}
        if not self._lock.acquire(timeout=QUEUE_PATIENCE_S):
            raise Unavailable  # the child is busy with other writes: this one runs here
        try:
            if not self._ensure_started() or not self._await_ready():
                raise Unavailable
            answer = self._exchange(request, op)
            self._unsettled = True
        finally:
            self._lock.release()
        if "error" in answer:
            error = answer["error"]
            raise UserError(
                str(error.get("message")), hint=error.get("hint"), status=int(error["status"])
            )
        if "failure" in answer:
            raise WriteFailed(
                f"the {op} failed in the writer process: {answer['failure']}",
                str(answer.get("kind") or "RuntimeError"),
            )
        self.handed += 1
        return answer.get("result")

    def settle(self) -> None:
        """Have the child refresh now the library map its writes wait for (a reader in the
        server sees the server's writes). Nothing when it wrote nothing since, or does not
        run, or is busy with a write (whose map the reader could not see anyway)."""
        if not self._unsettled or not self._lock.acquire(timeout=QUEUE_PATIENCE_S):
            return
        try:
            if self._unsettled and self._child.running and self._ready:
                with contextlib.suppress(Unavailable, UserError):
                    self._exchange({"settle": True}, "map refresh")
                    self._unsettled = False
        finally:
            self._lock.release()

    def close(self) -> None:
        """Stop the child for good, once it has refreshed the library map its writes wait
        for (it also stops by itself when the server is gone); one busy with a write is
        killed, and that write's client told it may not have finished."""
        self._closed = True
        if self._lock.acquire(timeout=1.0):
            try:
                self._child.stop(grace_s=CLOSE_GRACE_S)
            finally:
                self._lock.release()
        else:
            self._child.kill()

    def _exchange(self, request: dict[str, Any], what: str) -> dict[str, Any]:
        """Send ``request`` and return its answer; the lock held and the child ready."""
        self._next_id += 1
        ident = request["id"] = self._next_id
        deadline = time.monotonic() + self.patience_s
        try:
            self._child.send(_frame(request), deadline)
        except TimeoutError:  # the child reads nothing: nothing was sent
            self._stop(f"took no request for {self.patience_s:.0f} s")
            raise Unavailable from None
        except OSError as exc:  # died: nothing, or part of a frame the child drops, sent
            self._stop(str(exc))
            raise Unavailable from None
        taken = False
        try:
            # the child says when it takes the request: one that ends before wrote nothing
            taken = self._answer(deadline).get("taken") == ident
            if not taken:
                raise ValueError("answered out of step")
            answer = self._answer(deadline)
            if answer.get("id") != ident:
                raise ValueError("answered out of step")
            return answer
        except (TimeoutError, OSError, ValueError, EOFError) as exc:
            reason = "did not answer in time" if isinstance(exc, TimeoutError) else str(exc)
            self._child.kill()
            taken = taken or self._took(ident)  # it may have just taken it
            self._stop(reason)
            if not taken:
                raise Unavailable from None
            raise UserError(
                f"the {what} may not have finished: brainmap's writer process {reason}",
                hint="check whether it was written before retrying; `brainmap reindex` "
                "indexes a file written but not indexed",
                status=503,
            ) from None

    def _took(self, ident: int) -> bool:
        """Whether the killed child said it took request ``ident`` (what is left of its
        answers, read to their end)."""
        try:
            while True:
                if self._answer(time.monotonic() + 1.0).get("taken") == ident:
                    return True
        except (TimeoutError, OSError, ValueError, EOFError):
            return False

    def _await_ready(self) -> bool:
        """Whether the child has opened the home, waiting a little for it; one that could
        not is stopped, and another tried later."""
        if self._ready:
            return True
        try:
            said = self._answer(time.monotonic() + READY_PATIENCE_S)
        except TimeoutError:  # still loading: this write runs here
            return False
        except (OSError, ValueError, EOFError) as exc:
            self._stop(str(exc))
            return False
        if said.get("ready") is not True:
            self._stop(f"cannot open the home ({said.get('failed', said)})")
            return False
        self._ready = True
        return True

    def _answer(self, deadline: float) -> dict[str, Any]:
        (length,) = _LENGTH.unpack(self._child.peek(_LENGTH.size, deadline))
        if length > MAX_FRAME_BYTES:
            raise ValueError("sent a frame out of step")
        body = self._child.take(_LENGTH.size + length, deadline)[_LENGTH.size :]
        answer = json.loads(body)
        if not isinstance(answer, dict):
            raise ValueError("sent a frame that is not an object")
        return answer

    def _ensure_started(self) -> bool:
        if self._child.running:
            return True
        if self._child.owned:
            self._stop("ended")
        else:
            self._child.stop()  # the child of a forked parent: not ours
        if self._closed or time.monotonic() < self._down_until:
            return False
        # told the pid of the process that starts it (a forked copy starts its own): a child
        # that starts after that process died ends at once
        self._child.args = (str(self._home), str(os.getpid()))
        if not self._child.start():
            self._down_until = time.monotonic() + RESTART_AFTER_S
            return False
        self._ready = False
        return True

    def _stop(self, reason: str) -> None:
        log.warning("brainmap's writer process %s: writing here for %.0f s", reason,
                    RESTART_AFTER_S)  # fmt: skip
        self._child.stop()
        self._down_until = time.monotonic() + RESTART_AFTER_S


def _frame(obj: dict[str, Any]) -> bytes:
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )
    return _LENGTH.pack(len(body)) + body


def read_frame(stream: BinaryIO) -> dict[str, Any] | None:
    """The child's next request, or None at the end of its input (the server is gone)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(head)
    body = stream.read(length)
    if len(body) < length:
        return None
    request = json.loads(body)
    if not isinstance(request, dict):
        raise ValueError("a request that is not an object")
    return request


def write_frame(stream: BinaryIO, obj: dict[str, Any]) -> None:
    """Send the child's answer."""
    stream.write(_frame(obj))
    stream.flush()


def lower_priority() -> None:
    """Run this process at the lowest nice value (19): it gets a small share of the cores
    the searches keep busy, but always some (see the module's docstring)."""
    if sys.platform != "win32":
        with contextlib.suppress(OSError):  # not allowed: it runs as it is
            os.nice(19)
