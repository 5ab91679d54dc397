"""Shell completion's reads: entry paths and slugs by prefix, bounded and read-only.

Completion runs on every Tab press, in a new process: these queries walk an index range
(``UNIQUE(library_id, path)``, ``entry_slug``) for at most ``limit`` rows, and never migrate
or create anything (an index of another schema version answers nothing).
"""

from __future__ import annotations

from pathlib import Path

import apsw

from brainmap.keys import EntryRef
from brainmap.store.schema import SCHEMA_VERSION, connect, user_version

_TOP = "\U0010ffff"  # sorts after any character: [prefix, prefix + _TOP) is a prefix range
_WAIT_MS = 200  # a writer holding the lock makes a Tab press answer nothing, not hang


def entry_refs(db_path: Path, prefix: str, limit: int = 50) -> list[str]:
    """Entry references starting with ``prefix``: ``library:path`` when the prefix has a
    colon, else library-relative paths (what ``brainmap get`` accepts without one)."""
    conn = _open(db_path)
    if conn is None:
        return []
    try:
        libraries = conn.execute("SELECT id, name FROM library ORDER BY name").fetchall()
        typed = EntryRef.parse(prefix)
        wanted = [(i, n) for i, n in libraries if n == typed.library or not typed.library]
        found: set[str] = set()
        for library_id, name in wanted:
            rows = conn.execute(
                "SELECT path FROM entry WHERE library_id = ? AND path >= ? AND path < ? "
                "ORDER BY path LIMIT ?",
                (library_id, typed.path, typed.path + _TOP, limit),
            ).fetchall()
            found.update(f"{name}:{r[0]}" if typed.library else str(r[0]) for r in rows)
        return sorted(found)[:limit]
    finally:
        conn.close()


def entry_slugs(db_path: Path, prefix: str, limit: int = 50) -> list[str]:
    """Entry slugs (what ``Brain: slug`` comments name) starting with ``prefix``."""
    conn = _open(db_path)
    if conn is None:
        return []
    try:
        rows = conn.execute(
            "SELECT DISTINCT slug FROM entry WHERE slug >= ? AND slug < ? ORDER BY slug LIMIT ?",
            (prefix.lower(), prefix.lower() + _TOP, limit),
        ).fetchall()
        return [str(r[0]) for r in rows]
    finally:
        conn.close()


def _open(db_path: Path) -> apsw.Connection | None:
    if not db_path.is_file():
        return None
    conn = connect(db_path, busy_timeout_ms=_WAIT_MS)
    if user_version(conn) != SCHEMA_VERSION:
        conn.close()
        return None
    return conn
