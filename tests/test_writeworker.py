"""A server's note writes run whole by a child process at the lowest priority: real child
processes on real homes with the bundled model, a real `brainmap serve`."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from brainmap import ops
from brainmap.errors import UserError
from brainmap.writeworker import Unavailable, WriteFailed, WriteWorker
from conftest import serving
from processes import cmdline, cpu_ticks, nice, pids, running, settled, stat, writer_of

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")


def _note(title: str, **more: object) -> dict[str, object]:
    return {"title": title, "body": f"{title}: restart the service afterwards.", **more}


def test_a_server_hands_its_writes_to_a_child_at_the_lowest_priority(
    brain: ops.Brain, home: Path
) -> None:
    brain.close()
    with serving(home) as url:
        writer = writer_of(home)
        deadline = time.monotonic() + 60
        while nice(writer) != 19:  # the child lowers its priority as it starts
            assert time.monotonic() < deadline, "the writer runs at its parent's priority"
            time.sleep(0.1)
        log = home / "logs" / "writeworker.log"  # its stderr, and its stdout but the answers
        for fd in (1, 2):
            assert Path(f"/proc/{writer}/fd/{fd}").resolve() == log.resolve()
        busy = settled(writer)
        with httpx.Client(base_url=url, timeout=120) as http:
            saved = http.post("/save", json=_note("rotating the cache certificate")).json()
            assert saved["status"] == "saved" and Path(saved["file"]).is_file()
            assert cpu_ticks(writer) > busy  # the child wrote it, not the server
            # the next search sees it, by its words and by its vector
            for mode in ("bm25", "vector"):
                hits = http.get("/search", params={"query": "cache certificate", "mode": mode})
                assert hits.json()["hits"][0]["id"] == saved["id"], mode
            again = http.post("/save", json=_note("rotating the cache certificate")).json()
            assert again["status"] == "duplicate" and again["candidates"][0]["id"] == saved["id"]
            # the op's own errors come back as the server would have answered them
            wrong = http.post("/save", json=_note("anywhere", library="nowhere"))
            assert wrong.status_code == 404 and "nowhere" in wrong.json()["detail"]
            assert wrong.json()["hint"]
            verified = http.post("/verify", json={"ref": saved["id"]}).json()
            assert verified["status"] == "verified"
            ingested = http.post("/ingest", json={"text": "The proxy listens on 8443.",
                                                  "uri": "https://example.com/proxy"})  # fmt: skip
            assert ingested.json()["status"] == "saved"
            newer = http.post("/save", json=_note("certificates, the new way", force=True)).json()
            superseded = http.post("/supersede", json={"old": saved["id"], "new": newer["id"]})
            assert superseded.status_code == 200, superseded.text
        assert writer_of(home) == writer  # one child did them all
        # the server embedded no passage itself: it would have started its passage worker
        assert not [p for p in pids() if "brainmap.passageworker" in cmdline(p)
                    and cmdline(int(stat(p)[1])).count(str(home))]  # fmt: skip
    deadline = time.monotonic() + 30
    while running(writer) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(writer)  # no child outlives its server
    assert "Traceback" not in log.read_text()


def test_a_server_writes_itself_while_its_child_is_down(brain: ops.Brain, home: Path) -> None:
    brain.close()
    with serving(home) as url:
        writer = writer_of(home)
        with httpx.Client(base_url=url, timeout=120) as http:
            assert http.post("/save", json=_note("first")).json()["status"] == "saved"
            os.kill(writer, signal.SIGKILL)
            for title in ("second", "third"):  # written by the server, not lost
                saved = http.post("/save", json=_note(title, force=True)).json()
                assert saved["status"] == "saved" and Path(saved["file"]).is_file()
                hits = http.get("/search", params={"query": title, "mode": "bm25"}).json()
                assert hits["hits"][0]["id"] == saved["id"]


def test_a_child_blocked_in_a_write_ends_with_its_killed_server(
    brain: ops.Brain, home: Path
) -> None:
    brain.close()
    with serving(home) as url, httpx.Client(base_url=url, timeout=120) as http:
        writer = writer_of(home)
        busy = settled(writer)
        assert http.post("/save", json=_note("before the crash")).json()["status"] == "saved"
        assert cpu_ticks(writer) > busy  # the child has loaded and writes
        server = int(stat(writer)[1])
        other = ops.Brain(home)
        try:
            with other.store.db.write():  # the next write waits for this lock (10 s at most)

                def blocked() -> None:
                    with contextlib.suppress(httpx.HTTPError):  # the server dies meanwhile
                        http.post("/save", json=_note("during the crash"))

                client = threading.Thread(target=blocked)
                client.start()
                time.sleep(1.5)  # the child took it and waits for the lock
                assert running(writer)
                os.kill(server, signal.SIGKILL)
                deadline = time.monotonic() + 3
                while running(writer) and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert not running(writer), "the writer outlived its server"
        finally:
            other.close()
        client.join(timeout=30)


@pytest.fixture
def worker(brain: ops.Brain, home: Path) -> WriteWorker:
    brain.close()
    return WriteWorker(home, home / "logs" / "writeworker.log")


def _save(worker: WriteWorker, title: str) -> dict[str, object]:
    data = ops.SaveInput(title=title, body="restart it afterwards").model_dump(mode="json")
    output: dict[str, object] = worker.run("save", data, "http", None)
    return output


def _handed(worker: WriteWorker, title: str) -> dict[str, object]:
    """Save through the child once it has loaded (until then the server would write)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return _save(worker, title)
        except Unavailable:
            assert time.monotonic() < deadline, "the child never took a write"
            time.sleep(0.2)


def test_a_write_the_child_cannot_finish_is_reported_and_the_next_is_written_here(
    worker: WriteWorker, home: Path
) -> None:
    worker.start()
    try:
        assert _handed(worker, "before it hangs")["status"] == "saved"
        with pytest.raises(WriteFailed) as failed:  # the kind it raised there comes back
            worker.run("stats", {}, "http", None)
        assert failed.value.kind == "ValueError" and "not a write" in str(failed.value)
        child = worker.pid
        assert child is not None
        worker.patience_s = 5.0
        os.kill(child, signal.SIGSTOP)  # a child that gets no CPU at all takes nothing
        with pytest.raises(Unavailable):  # so the server writes it itself
            _save(worker, "while it hangs")
        assert not running(child)  # stopped, never to take a write later
        with pytest.raises(Unavailable):  # for RESTART_AFTER_S the server writes itself
            _save(worker, "right after")
        worker._down_until = 0.0  # as if RESTART_AFTER_S had passed
        assert _handed(worker, "a new child")["status"] == "saved"
        child = worker.pid
        assert child is not None and worker.handed == 2
        other = ops.Brain(home)  # another writer holds the index past the server's patience
        try:
            with other.store.db.write(), pytest.raises(UserError) as held:
                _save(worker, "while another writes")
        finally:
            other.close()
        assert held.value.status == 503 and "may not have finished" in held.value.message
        assert not running(child)  # stopped, not left to write behind the client's back
    finally:
        worker.close()


def test_a_child_that_cannot_open_the_home_leaves_the_writes_to_the_server(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    worker = WriteWorker(blocker / "home")
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while worker.pid is not None:  # until it said it cannot: it is stopped
            with pytest.raises(Unavailable):
                worker.run("save", {"title": "t", "body": "b"}, "http", None)
            assert time.monotonic() < deadline, "the child never said it cannot open the home"
        started = time.monotonic()
        with pytest.raises(Unavailable):  # no new child, no wait: written here for a while
            worker.run("save", {"title": "t", "body": "b"}, "http", None)
        assert time.monotonic() - started < 1 and worker.pid is None
    finally:
        worker.close()
