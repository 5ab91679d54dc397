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
