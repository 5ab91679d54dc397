"""A real PostgreSQL with pgvector for the tests, from the binaries of the pgserver wheel.

The server runs from a copy of the wheel's ``pginstall`` and ``pgserver.libs`` folders (the wheel's own folder may sit
where another user cannot read, such as under /root), as ``nobody`` when the tests run as root
(PostgreSQL refuses to), on a free port of 127.0.0.1, with fsync off. :meth:`Postgres.stop`
stops it with ``pg_ctl``; pgserver's own helper is not used, because it adds a system user and
opens the permissions of every folder above its data, and leaves the server running when its
owner is killed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

START_ATTEMPTS = 3


def _pginstall() -> Path:
    """The wheel's PostgreSQL installation (bin, lib, share), found without importing pgserver
    (its import warns about $XDG_RUNTIME_DIR)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the PostgreSQL tests need the pgserver wheel: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Postgres:
    """One throwaway PostgreSQL cluster; :meth:`database` makes an empty database in it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bm-pg-"))
        self.root.chmod(0o755)
        self.user = "nobody" if os.geteuid() == 0 else None
        self.bin = self.root / "pgserver" / "pginstall" / "bin"
        self.data = self.root / "data"
        self.port = 0
        self.url = ""

    def _run(self, *args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, user=self.user, cwd=self.root)

    def start(self) -> Postgres:
        # the binaries find their libpq at $ORIGIN/../../../pgserver.libs: the same layout
        wheel = _pginstall().parent
        shutil.copytree(wheel / "pginstall", self.root / "pgserver" / "pginstall", symlinks=True)
        shutil.copytree(wheel.parent / "pgserver.libs", self.root / "pgserver.libs")
        self.data.mkdir(mode=0o700)
        if self.user:
            shutil.chown(self.data, self.user)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "-N")  # fmt: skip
        for attempt in range(START_ATTEMPTS):  # another process may take the port first
            self.port = _free_port()
            options = f"-h 127.0.0.1 -p {self.port} -k {self.data} -F -c max_connections=200"
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-l",
                          str(self.data / "log"), "-o", options, "start")  # fmt: skip
                break
            except subprocess.CalledProcessError:
                if attempt == START_ATTEMPTS - 1:
                    raise
                time.sleep(0.2)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        return self

    def database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def drop(self, url: str) -> None:
        """Drop the database of ``url`` (its connections closed first)."""
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m",
                          "immediate", "stop")  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)
