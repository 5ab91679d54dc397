"""The write worker's child (:mod:`brainmap.writeworker`): runs the note writes a server
hands it, on the same home, at the lowest CPU priority. Run as
``python -m brainmap.ops.writer HOME SERVER_PID`` (it ends when that process is gone)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO

from brainmap.errors import UserError
from brainmap.ops.brain import Brain
from brainmap.ops.core import OPS, Caller, describe_errors, load_all, to_jsonable
from brainmap.writeworker import lower_priority, read_frame, write_frame

log = logging.getLogger("brainmap.ops.writer")


def serve(home: str, requests: BinaryIO, answers: BinaryIO) -> None:
    """The child's loop: a request in, its answer out, until the server closes its end;
    then the library map its writes wait for is refreshed."""
    lower_priority()
    brain: Brain | None = None
    try:
        load_all()
        brain = Brain(home)
        brain.settle_map_later()  # the saves of a few seconds share one refresh, as in serve
        brain.hold_vector_cache()
        brain.searcher.embedder.load()  # the first save does not wait for the model
    except Exception as exc:  # the server writes itself, and tries another child later
        traceback.print_exc()
        write_frame(answers, {"failed": f"{type(exc).__name__}: {exc}"})
        if brain is not None:
            brain.close()
        return
    with brain:
        write_frame(answers, {"ready": True})
        while (request := read_frame(requests)) is not None:
            write_frame(answers, {"taken": request.get("id")})  # from now on it may write
            write_frame(answers, {"id": request.get("id"), **_answer(brain, request)})


def _answer(brain: Brain, request: dict[str, Any]) -> dict[str, Any]:
    """What running one request gave: its result, the user's error, or a failure."""
    try:
        if request.get("settle"):
            brain.settle_map()
            return {"result": None}
        o = OPS[request["op"]]
        if not o.handed:
            raise ValueError(f"{o.name} is not a write the server hands over")
        inp = o.input.model_validate(request["input"])
        caller: Caller = request["caller"]
        with brain.store.db.seeing(request["view"]):
            return {"result": to_jsonable(o.run(brain, inp, caller))}
    except UserError as exc:
        return {"error": {"message": exc.message, "hint": exc.hint, "status": exc.status}}
    except Exception as exc:
        from pydantic import ValidationError

        kind = type(exc).__name__
        if isinstance(exc, ValidationError):  # the server validated it: a version mismatch
            return {"failure": describe_errors(exc.errors()), "kind": kind}
        traceback.print_exc()  # into the child's log
        return {"failure": f"{kind}: {exc}", "kind": kind}


def end_with(parent: int, every_s: float = 0.5) -> None:
    """End this process as soon as ``parent`` is gone. The end of its input ends the loop
    between writes; this ends one blocked meanwhile (on a lock another process holds, say),
    which would otherwise write long after its server died, for no client. What it was
    writing is lost as with the server's own crash: the file is whole or absent, and the
    index rolls back."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="end-with-server", daemon=True).start()


def main() -> None:
    """Answer on what was stdout; whatever else writes to stdout (a library's print) goes to
    stderr, the child's log, instead of into the answers."""
    end_with(int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the server decides
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.argv[1], sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
