"""Writes under attack: a folder swapped with a symlink while saves run, a FIFO where an
entry was, and a server asked to stop with a request in flight.

RELIABILITY 18 (symlink races, the save side) and 19 (special files where entries were).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from brainmap import ops
from brainmap.errors import UserError
from brainmap.safefile import TEMP_PREFIX, library_lock
from conftest import free_port, serving

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux only")

AT_FDCWD, RENAME_EXCHANGE = -100, 2
# the attacker: swaps two names as fast as it can, in its own process so that it is not
# slowed down by the GIL of the writers it races with
SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
print("ready", flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)
"""


def _exchange(a: Path, b: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@contextlib.contextmanager
def _swapping(folder: Path, decoy: Path) -> Iterator[None]:
    """``folder`` and the symlink ``decoy`` exchange names in a loop; afterwards ``folder``
    is the real folder again."""
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(folder), str(decoy)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield
    finally:
        proc.kill()
        proc.wait()
    if folder.is_symlink():
        _exchange(folder, decoy)


def _race_setup(library: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    race = library / "race"
    race.mkdir()
    decoy = library / "decoy"
    os.symlink(outside, decoy)
    return race, decoy, outside


def _files_under(root: Path) -> list[str]:
    """Every file below ``root``, not following symlinks."""
    return [
        os.path.join(top, name)
        for top, dirs, names in os.walk(root)
        for name in names
        if not os.path.islink(os.path.join(top, name))
    ]


def _assert_race_outcome(
    brain: ops.Brain, library: Path, outside: Path, saved: list[tuple[str, str]]
) -> None:
    assert _files_under(outside) == []  # nothing landed outside the library
    temps = [f for f in _files_under(library) if Path(f).name.startswith(TEMP_PREFIX)]
    assert temps == []  # and no temp file is left behind, anywhere
    for entry_id, rel in saved:  # every note that was answered "saved" is there and indexed
        assert (library / rel).is_file(), rel
        assert brain.store.entries.entry(entry_id) is not None, rel
    on_disk = {f"race/{name}" for name in os.listdir(library / "race")}
    assert on_disk == {rel for _, rel in saved}  # no note the index does not know


def test_save_while_its_folder_is_swapped_with_a_symlink(
    brain: ops.Brain, library: Path, tmp_path: Path
) -> None:
    """RELIABILITY 18 (save): nothing written outside, no temp file left, every failure is
    a user error (4xx), every saved note indexed."""
    race, decoy, outside = _race_setup(library, tmp_path)
    saved: list[tuple[str, str]] = []
    refused: list[tuple[int, str]] = []
    with _swapping(race, decoy):
        for i in range(80):
            try:
                result = ops.save(brain, ops.SaveInput(
                    library="example", folder="race", title=f"race note {i}",
                    body=f"written while the folder moves {i}", force=True,
                ))  # fmt: skip
            except UserError as exc:
                refused.append((exc.status if exc.hint else 0, exc.message))  # 0: no hint
            else:
                assert result.status == "saved" and result.path is not None
                saved.append((str(result.id), result.path))
    assert [(status, msg) for status, msg in refused if not 400 <= status < 500] == []
    assert saved, "no save got through: the race tested nothing"
    _assert_race_outcome(brain, library, outside, saved)


def test_http_save_while_its_folder_is_swapped_with_a_symlink(
    brain: ops.Brain, library: Path, home: Path, tmp_path: Path
) -> None:
    """The same race through a real server, with four clients at once: every answer is 200
    or 4xx, never 500."""
    race, decoy, outside = _race_setup(library, tmp_path)
    brain.close()
    saved: list[tuple[str, str]] = []
    answers: list[tuple[int, str]] = []

    def client(n: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for i in range(20):
                r = http.post("/save", json={
                    "library": "example", "folder": "race", "title": f"race {n} note {i}",
                    "body": f"client {n} writes {i} while the folder moves", "force": True,
                })  # fmt: skip
                answers.append((r.status_code, r.text[:300]))
                if r.status_code == 200:
                    saved.append((r.json()["id"], r.json()["path"]))

    with serving(home) as url, _swapping(race, decoy):
        threads = [threading.Thread(target=client, args=(n, url)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    bad = [(status, text) for status, text in answers if not (200 <= status < 500)]
    assert bad == []
    assert all(status == 200 or "hint" in text for status, text in answers)
    assert saved, "no save got through: the race tested nothing"
    reopened = ops.Brain(home)
    try:
        _assert_race_outcome(reopened, library, outside, saved)
    finally:
        reopened.close()


# --- a FIFO where an entry was ----------------------------------------------------------------

TIMEOUT_S = 60  # a regression hangs: the subprocess is killed and the test fails


def _fifo_in_place(brain: ops.Brain, library: Path) -> tuple[str, Path]:
    found = brain.store.entries.find_entry("example:gotchas/cron-timezone.md")
    assert found is not None
    path = library / "gotchas" / "cron-timezone.md"
    path.unlink()
    os.mkfifo(path)
    return found[0], path


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brainmap", *args], capture_output=True, text=True,
        env={**os.environ, "BRAINMAP_HOME": str(home)}, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


def test_verify_and_merge_into_a_fifo_fail_at_once_from_the_cli(
    brain: ops.Brain, library: Path, home: Path
) -> None:
    """RELIABILITY 19: a FIFO in place of an entry is a clear error, never a hang."""
    entry, _ = _fifo_in_place(brain, library)
    brain.close()
    for args in (("verify", entry), ("save", "more on cron", "-b", "x", "--merge-into", entry)):
        proc = _cli(home, *args)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr
    # and the library's lock was let go: a save to that library goes through
    proc = _cli(home, "save", "after the fifo", "-b", "fine", "-l", "example", "--force")
    assert proc.returncode == 0, proc.stderr


def test_verify_and_merge_into_a_fifo_over_http_let_the_library_go(
    brain: ops.Brain, library: Path, home: Path
) -> None:
    entry, _ = _fifo_in_place(brain, library)
    brain.close()
    with serving(home) as url, httpx.Client(base_url=url, timeout=TIMEOUT_S) as http:
        r = http.post("/verify", json={"ref": entry})
        assert r.status_code == 409 and "not a regular file" in r.json()["detail"], r.text
        assert r.json().get("hint")
        r = http.post("/save", json={"title": "more", "body": "x", "merge_into": entry})
        assert r.status_code == 409 and "not a regular file" in r.json()["detail"], r.text
        r = http.post("/save", json={"title": "after the fifo", "body": "fine",
                                     "library": "example", "force": True})  # fmt: skip
        assert r.status_code == 200, r.text
    proc = _cli(home, "save", "from the cli too", "-b", "fine", "-l", "example", "--force")
    assert proc.returncode == 0, proc.stderr


def test_serve_stops_on_sigterm_with_a_request_in_flight(brain: ops.Brain, home: Path) -> None:
    """A save that waits (here: for a library lock this test holds) does not keep the
    server alive after SIGTERM."""
    brain.close()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "brainmap", "--home", str(home), "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            assert server.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.2)
        with library_lock(home, "example"):
            in_flight = threading.Thread(target=lambda: _suppress_post(
                f"{url}/save", {"title": "waits", "body": "x", "library": "example"}
            ), daemon=True)  # fmt: skip
            in_flight.start()
            time.sleep(1.0)  # the request is now waiting inside the server
            assert in_flight.is_alive()
            started = time.monotonic()
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pytest.fail("the server ignored SIGTERM with a request in flight")
            assert time.monotonic() - started < 10
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _suppress_post(url: str, body: dict[str, str]) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url, json=body, timeout=60)


def test_no_temp_file_is_left_when_a_folder_is_in_the_way(brain: ops.Brain, library: Path) -> None:
    """A file where a folder of the path should be is a user error, and nothing is left."""
    (library / "blocked").write_text("a file, not a folder\n")
    with pytest.raises(UserError) as info:
        ops.save(brain, ops.SaveInput(library="example", folder="blocked/deeper",
                                      title="cannot go there", body="x", force=True))  # fmt: skip
    assert 400 <= info.value.status < 500 and info.value.hint
    assert not [f for f in _files_under(library) if Path(f).name.startswith(TEMP_PREFIX)]
