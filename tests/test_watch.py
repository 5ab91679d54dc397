"""`brainmap watch` keeps the index current as files change."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from brainmap import config
from brainmap.watcher import ChangeFilter
from conftest import run_cli, write


def _eventually(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise AssertionError("condition not met in time")


def _paths(home: Path, query: str) -> list[str]:
    out = run_cli(home, "search", query, "--mode", "bm25", "--json").stdout
    return [h["path"] for h in json.loads(out)["hits"]]


def test_change_filter(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (lib / "sub").mkdir(parents=True)
    changes = ChangeFilter([config.LibraryConfig("lib", lib)])
    assert changes.library(False, str(lib / "a.md")) == "lib"
    assert changes.library(False, str(lib / "sub")) == "lib"  # a new folder: scan it
    assert changes.library(True, str(lib / "gone-folder")) == "lib"  # deleted, no suffix
    assert changes.library(True, str(lib / "notes.txt")) is None
    assert changes.library(False, str(lib / "src" / "app.py")) == "lib"  # breadcrumbs may change
    assert changes.library(False, str(lib / ".a.md.swp")) is None
    assert changes.library(False, str(lib / ".git" / "objects" / "ab")) is None
    assert changes.library(False, str(lib / "x" / ".brainmap-tmp-123")) is None
    assert changes.library(False, str(tmp_path / "elsewhere.md")) is None


def test_watch_follows_create_edit_delete(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib / "first.md", "# First\n\nplatypus\n")
    run_cli(home, "library", "add", "lib", str(lib))
    proc = subprocess.Popen(
        [sys.executable, "-m", "brainmap", "--home", str(home), "watch", "lib"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
    )  # fmt: skip
    try:
        _eventually(lambda: _paths(home, "platypus") == ["first.md"])
        write(lib / "sub" / "second.md", "# Second\n\nwombat\n")
        _eventually(lambda: _paths(home, "wombat") == ["sub/second.md"])
        (lib / "first.md").write_text("# First\n\nplatypus and quokka\n")
        _eventually(lambda: _paths(home, "quokka") == ["first.md"])
        (lib / "sub" / "second.md").unlink()
        _eventually(lambda: _paths(home, "wombat") == [])
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # say where it hangs
            out, err = proc.communicate(timeout=30)
            raise AssertionError(f"watch did not stop on SIGINT:\n{out}\n{err}") from None
    assert proc.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


def _ports(home: Path, question: str) -> set[str]:
    out = run_cli(home, "ask", question, "--no-web", "--root", "facts", "--json").stdout
    return {f["object"] for f in json.loads(out)["facts"] if f["predicate"] == "publishes"}


def test_watch_follows_a_file_a_compose_file_was_read_with(home: Path, tmp_path: Path) -> None:
    """The env file an include names is no file the library indexes (nor is every file an
    ``extends`` names): a change to it is followed all the same."""
    lib = tmp_path / "lib"
    write(lib / "ledger" / "compose.yaml", "include:\n  - path: ./db/compose.yaml\n"
          "    env_file: ./db/db.env\nservices:\n  web: {ports: ['80:80']}\n")  # fmt: skip
    write(lib / "ledger" / "db" / "compose.yaml",
          "services:\n  pg: {ports: ['${PG_PORT:-5432}:5432']}\n")  # fmt: skip
    write(lib / "ledger" / "db" / "db.env", "PG_PORT=5499\n")
    run_cli(home, "library", "add", "lib", str(lib))
    assert ChangeFilter([config.LibraryConfig("lib", lib)]).library(
        False, str(lib / "ledger" / "db" / "db.env")
    ) is None  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "brainmap", "--home", str(home), "watch", "lib"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    question = "which port does the pg service of ledger publish"
    try:
        _eventually(lambda: _ports(home, question) == {"port:5499"})
        time.sleep(1.0)  # the watcher has read what ledger was read with since
        write(lib / "ledger" / "db" / "db.env", "PG_PORT=6543\n")
        _eventually(lambda: _ports(home, question) == {"port:6543"})
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
