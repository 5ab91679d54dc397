"""Connections, schema and migrations: every connection comes from :func:`connect`."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from brainmap.analysis import FTS_TOKENIZER
from brainmap.errors import UserError

SCHEMA_VERSION = 11
CACHE_SCHEMA_VERSION = 3
BUSY_TIMEOUT_MS = 10_000
_SQL_VARS = 500  # keep IN (...) lists well under SQLite's variable limit

# The contract every connection honours (a test checks each one); busy_timeout comes first so
# that even switching a new database to WAL waits for a concurrent opener.
PRAGMAS = {
    "busy_timeout": BUSY_TIMEOUT_MS,
    "journal_mode": "wal",
    "foreign_keys": 1,
    "synchronous": 1,  # NORMAL: durable at checkpoints, safe in WAL mode
}
_TUNING = {"temp_store": "memory", "mmap_size": 256 * 1024 * 1024, "cache_size": -65536}

_SCHEMA_V1 = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
INSERT INTO meta(key, value) VALUES ('vec_gen', 0);

CREATE TABLE library(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  scope TEXT NOT NULL,
  indexed_at TEXT
);

CREATE TABLE entry(
  id TEXT PRIMARY KEY,
  library_id INTEGER NOT NULL REFERENCES library(id) ON DELETE CASCADE,
  path TEXT NOT NULL,
  title TEXT NOT NULL,
  type TEXT NOT NULL,
  project TEXT,
  tags TEXT NOT NULL DEFAULT '[]',
  aliases TEXT NOT NULL DEFAULT '[]',
  created TEXT,
  last_verified TEXT,
  updated TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  mtime_ns INTEGER NOT NULL,
  size INTEGER NOT NULL,
  indexed_ns INTEGER NOT NULL,
  observed_at TEXT NOT NULL,
  source_rev TEXT,
  meta TEXT NOT NULL DEFAULT '{{}}',
  warnings TEXT NOT NULL DEFAULT '[]',
  UNIQUE(library_id, path)
);
CREATE INDEX entry_type ON entry(type);
CREATE INDEX entry_updated ON entry(updated);

CREATE TABLE entry_tag(
  tag TEXT NOT NULL,
  entry_id TEXT NOT NULL REFERENCES entry(id) ON DELETE CASCADE,
  PRIMARY KEY(tag, entry_id)
) WITHOUT ROWID;
CREATE INDEX entry_tag_entry ON entry_tag(entry_id);

CREATE TABLE chunk(
  id INTEGER PRIMARY KEY,
  entry_id TEXT NOT NULL REFERENCES entry(id) ON DELETE CASCADE,
  ord INTEGER NOT NULL,
  heading TEXT NOT NULL,
  line_start INTEGER NOT NULL,
  line_end INTEGER NOT NULL,
  text TEXT NOT NULL,
  embed_hash TEXT NOT NULL
);
CREATE INDEX chunk_entry ON chunk(entry_id, ord);

CREATE VIRTUAL TABLE chunk_fts USING fts5(
  title, heading, body, content='', contentless_delete=1, tokenize="{FTS_TOKENIZER}"
);
CREATE VIRTUAL TABLE chunk_vocab USING fts5vocab(chunk_fts, row);

CREATE TABLE chunk_vec(
  chunk_id INTEGER PRIMARY KEY REFERENCES chunk(id) ON DELETE CASCADE,
  library_id INTEGER NOT NULL,
  model TEXT NOT NULL,
  vec BLOB NOT NULL
);
CREATE INDEX chunk_vec_model ON chunk_vec(model);

CREATE TRIGGER chunk_ad AFTER DELETE ON chunk BEGIN
  DELETE FROM chunk_fts WHERE rowid = old.id;
END;
CREATE TRIGGER chunk_vec_ai AFTER INSERT ON chunk_vec BEGIN
  UPDATE meta SET value = value + 1 WHERE key = 'vec_gen';
END;
CREATE TRIGGER chunk_vec_ad AFTER DELETE ON chunk_vec BEGIN
  UPDATE meta SET value = value + 1 WHERE key = 'vec_gen';
END;

CREATE TABLE skipped(
  library_id INTEGER NOT NULL REFERENCES library(id) ON DELETE CASCADE,
  path TEXT NOT NULL,
  reason TEXT NOT NULL,
  at TEXT NOT NULL,
  mtime_ns INTEGER,
  size INTEGER,
  PRIMARY KEY(library_id, path)
) WITHOUT ROWID;
"""

# v2: the knowledge graph. Nodes are keyed "kind:identity" (entity:postgres, entry:<id>,
# file:<library>/<path>, commit:<sha>, person:<email>, tag:<tag>, slug:<stem>) so that a rebuild
# gives the same keys. Every edge has an owner whose deletion cascades to it: an entry, a code
# file, or (git history) the library. A node lives as long as an edge mentions it.
_SCHEMA_V2 = """
CREATE TABLE node(
  key TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  label TEXT NOT NULL,
  props TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;
CREATE INDEX node_kind ON node(kind);

CREATE TABLE code_file(
  id TEXT PRIMARY KEY,
  library_id INTEGER NOT NULL REFERENCES library(id) ON DELETE CASCADE,
  path TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  blob TEXT,
  mtime_ns INTEGER NOT NULL,
  size INTEGER NOT NULL,
  indexed_ns INTEGER NOT NULL,
  observed_at TEXT NOT NULL,
  source_rev TEXT,
  UNIQUE(library_id, path)
);

CREATE TABLE edge(
  id INTEGER PRIMARY KEY,
  subject TEXT NOT NULL,
  predicate TEXT NOT NULL,
  object TEXT NOT NULL,
  root TEXT NOT NULL DEFAULT 'info',
  confidence TEXT,
  library_id INTEGER NOT NULL REFERENCES library(id) ON DELETE CASCADE,
  entry_id TEXT REFERENCES entry(id) ON DELETE CASCADE,
  code_id TEXT REFERENCES code_file(id) ON DELETE CASCADE,
  source_uri TEXT,
  line INTEGER,
  observed_at TEXT,
  source_rev TEXT,
  props TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX edge_subject ON edge(subject, predicate);
CREATE INDEX edge_object ON edge(object, predicate);
-- partial indexes: each edge updates only the one for its owner (an edge costs three index
-- writes, not five); deleting a library scans its edges once, which is rare
CREATE INDEX edge_entry ON edge(entry_id) WHERE entry_id IS NOT NULL;
CREATE INDEX edge_code ON edge(code_id) WHERE code_id IS NOT NULL;
CREATE INDEX edge_git ON edge(library_id, predicate) WHERE entry_id IS NULL AND code_id IS NULL;

CREATE TRIGGER edge_ad AFTER DELETE ON edge BEGIN
  DELETE FROM node WHERE key = old.subject
    AND NOT EXISTS (SELECT 1 FROM edge WHERE subject = old.subject)
    AND NOT EXISTS (SELECT 1 FROM edge WHERE object = old.subject);
  DELETE FROM node WHERE key = old.object
    AND NOT EXISTS (SELECT 1 FROM edge WHERE subject = old.object)
    AND NOT EXISTS (SELECT 1 FROM edge WHERE object = old.object);
END;

CREATE TABLE git_import(
  library_id INTEGER PRIMARY KEY REFERENCES library(id) ON DELETE CASCADE,
  repo TEXT NOT NULL,
  head TEXT NOT NULL,
  prefix TEXT NOT NULL,
  filters TEXT NOT NULL,
  commits INTEGER NOT NULL,
  at TEXT NOT NULL
);

ALTER TABLE entry ADD COLUMN slug TEXT NOT NULL DEFAULT '';
ALTER TABLE entry ADD COLUMN blob TEXT;
CREATE INDEX entry_slug ON entry(slug);
-- existing entries get their slug now, and their graph at the next reindex (mtime 0 and no
-- content hash make it re-parse them; chunks and vectors stay: their text hashes are unchanged)
UPDATE entry SET slug = brainmap_slug(path), mtime_ns = 0, content_hash = '';
"""

# v3: the facts root. Observations are what one source states, owned like edges by their
# entry (narrative), code file (config) or, for runtime snapshots, a named unit of the library.
# Assertions are edges with root 'facts', recomputed from a library's observations as a whole
# whenever they change (fact_pairing.digest tells); AUTOINCREMENT keeps that digest honest.
_SCHEMA_V3 = """
CREATE TABLE observation(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  library_id INTEGER NOT NULL REFERENCES library(id) ON DELETE CASCADE,
  entry_id TEXT REFERENCES entry(id) ON DELETE CASCADE,
  code_id TEXT REFERENCES code_file(id) ON DELETE CASCADE,
  unit TEXT,
  subject TEXT NOT NULL,
  predicate TEXT NOT NULL,
  object TEXT NOT NULL,
  kind TEXT NOT NULL,
  method TEXT NOT NULL,
  path TEXT NOT NULL,
  line INTEGER,
  observed_at TEXT NOT NULL,
  source_rev TEXT,
  props TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX observation_library ON observation(library_id, unit);
CREATE INDEX observation_entry ON observation(entry_id) WHERE entry_id IS NOT NULL;
CREATE INDEX observation_code ON observation(code_id) WHERE code_id IS NOT NULL;

CREATE TABLE fact_pairing(
  library_id INTEGER PRIMARY KEY REFERENCES library(id) ON DELETE CASCADE,
  digest TEXT NOT NULL,
  at TEXT NOT NULL
);
CREATE INDEX edge_facts ON edge(library_id) WHERE root = 'facts';

-- existing entries and code files are read again at the next reindex for their observations
UPDATE entry SET mtime_ns = 0, content_hash = '';
UPDATE code_file SET mtime_ns = 0, content_hash = '';
"""

# v4: the library map. One block per library is active; a recompute inserts the new blocks and
# marks the old ones superseded in one transaction (a few superseded blocks are kept as history).
# ``state`` summarises what the block was computed from (entries, code files, facts, git): a
# library whose state differs is recomputed by the next reindex, also after a crash.
# ``partners`` holds, per library sharing entities with this one, a digest of those entities.
# ``vec`` embeds the block's sentence with ``model`` and ``centroid`` is the mean of the
# library's ``centroid_n`` chunk vectors (search routes by it); NULL when there were none.
_SCHEMA_V4 = """
CREATE TABLE map_block(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  library_id INTEGER NOT NULL REFERENCES library(id) ON DELETE CASCADE,
  status TEXT NOT NULL CHECK (status IN ('active', 'superseded')),
  created_at TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  state TEXT NOT NULL,
  block TEXT NOT NULL,
  partners TEXT NOT NULL DEFAULT '{}',
  model TEXT,
  vec BLOB,
  centroid BLOB,
  centroid_n INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX map_block_active ON map_block(library_id) WHERE status = 'active';
CREATE INDEX map_block_library ON map_block(library_id, id);
INSERT INTO meta(key, value) VALUES ('map_gen', 0);
-- a library's centroid reads its vectors; without this, every vector of every library
CREATE INDEX chunk_vec_library ON chunk_vec(library_id, model);
"""

# v5: stems. The full-text table gains a column of the words' other forms (stems, joined
# bracketed words), entries their language, libraries the version of the text analysis and
# the language setting their rows were made with: a library whose rows were made otherwise is
# re-read in full by the next reindex.
_SCHEMA_V5 = f"""
DROP TABLE chunk_vocab;
DROP TABLE chunk_fts;
CREATE VIRTUAL TABLE chunk_fts USING fts5(
  title, heading, body, forms, content='', contentless_delete=1, tokenize="{FTS_TOKENIZER}"
);
CREATE VIRTUAL TABLE chunk_vocab USING fts5vocab(chunk_fts, row);
ALTER TABLE entry ADD COLUMN language TEXT;
ALTER TABLE library ADD COLUMN analyzer INTEGER NOT NULL DEFAULT 0;
ALTER TABLE library ADD COLUMN language TEXT NOT NULL DEFAULT 'auto';
"""

# v6: the log of vector changes. A searcher's vector matrix takes in the vectors added or removed
# since its snapshot instead of reading all of them again. Every insert or delete in chunk_vec
# bumps vec_gen and logs the chunk under seq = the new vec_gen. Every VEC_LOG_PRUNE_EVERY
# changes the log drops those older than the last VEC_LOG_KEEP and records in vec_pruned the
# last seq it dropped: a snapshot older than that reads every vector again.
VEC_LOG_KEEP = 8192
VEC_LOG_PRUNE_EVERY = 4096
_SCHEMA_V6 = f"""
CREATE TABLE vec_change(
  seq INTEGER PRIMARY KEY,
  chunk_id INTEGER NOT NULL,
  model TEXT NOT NULL
);
INSERT INTO meta(key, value) SELECT 'vec_pruned', value FROM meta WHERE key = 'vec_gen';
DROP TRIGGER chunk_vec_ai;
DROP TRIGGER chunk_vec_ad;
CREATE TRIGGER chunk_vec_ai AFTER INSERT ON chunk_vec BEGIN
  UPDATE meta SET value = value + 1 WHERE key = 'vec_gen';
  INSERT INTO vec_change(seq, chunk_id, model)
    SELECT value, new.chunk_id, new.model FROM meta WHERE key = 'vec_gen';
END;
CREATE TRIGGER chunk_vec_ad AFTER DELETE ON chunk_vec BEGIN
  UPDATE meta SET value = value + 1 WHERE key = 'vec_gen';
  INSERT INTO vec_change(seq, chunk_id, model)
    SELECT value, old.chunk_id, old.model FROM meta WHERE key = 'vec_gen';
END;
CREATE TRIGGER vec_change_prune AFTER INSERT ON vec_change
WHEN new.seq % {VEC_LOG_PRUNE_EVERY} = 0 BEGIN
  DELETE FROM vec_change WHERE seq <= new.seq - {VEC_LOG_KEEP};
  UPDATE meta SET value = max(value, new.seq - {VEC_LOG_KEEP}) WHERE key = 'vec_pruned';
END;
"""

# v7: supersession and status. ``file_status`` is what an entry's own file says (active,
# retired, or archived under ``archive/``); ``status`` is the effective one: that, else
# 'superseded' when another entry's ``supersedes`` names it or its own ``superseded_by`` names
# an entry that is indexed. The links each entry's frontmatter states live in ``supersession``
# (owned by that entry, so a deleted NEW un-supersedes OLD); the store recomputes the statuses
# they touch in the same transaction.
# Default search leaves out every entry not active: the partial index finds those few at once.
# Entries whose frontmatter may say any of this are read again by the next reindex.
_SCHEMA_V7 = """
ALTER TABLE entry ADD COLUMN file_status TEXT NOT NULL DEFAULT 'active';
ALTER TABLE entry ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
CREATE INDEX entry_inactive ON entry(status) WHERE status != 'active';
CREATE TABLE supersession(
  entry_id TEXT NOT NULL REFERENCES entry(id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('supersedes', 'superseded_by')),
  library TEXT NOT NULL,
  slug TEXT NOT NULL,
  PRIMARY KEY(entry_id, role, library, slug)
) WITHOUT ROWID;
CREATE INDEX supersession_target ON supersession(slug, library, role);
UPDATE entry SET mtime_ns = 0, content_hash = ''
WHERE path LIKE 'archive/%' OR json_extract(meta, '$.supersedes') IS NOT NULL
   OR json_extract(meta, '$.superseded_by') IS NOT NULL
   OR json_extract(meta, '$.status') IS NOT NULL;
"""

# v8: the text generation. Like vec_gen for vectors, text_gen changes whenever the full-text
# index does, by the number of rows changed: every flush of full-text rows adds how many it
# wrote (store.database), and every chunk deleted adds one (its row leaves by chunk_ad). What is read from the index as a whole (the
# words' document frequencies, the chunk count, the languages) is kept until it changes; the
# languages are counted on an index (a scan of every entry took 20 ms on tldr).
_SCHEMA_V8 = """
INSERT INTO meta(key, value) VALUES ('text_gen', 0);
CREATE INDEX entry_language ON entry(language);
CREATE TRIGGER chunk_text_ad AFTER DELETE ON chunk BEGIN
  UPDATE meta SET value = value + 1 WHERE key = 'text_gen';
END;
"""

# v9: the machine whose folder a library is, as a shared (PostgreSQL) index records it; in
# brain.db always empty: every library is this machine's
_SCHEMA_V9 = """
ALTER TABLE library ADD COLUMN host TEXT;
"""

# v10: the vectors of a chunk's windows (embedding.vector_texts: a long run of turns is also
# embedded a few turns at a time), float32 bytes one after another; NULL for a chunk that has
# none. A vector search scores a chunk by the best of its vectors.
_SCHEMA_V10 = """
ALTER TABLE chunk_vec ADD COLUMN parts BLOB;
"""

# v11: the version of the config collectors (collectors.CONFIG_COLLECTORS) whose facts a
# library's config files gave: when it is behind, they alone are read again
_SCHEMA_V11 = """
ALTER TABLE library ADD COLUMN collectors INTEGER NOT NULL DEFAULT 0;
"""

# Forward migrations: MIGRATIONS[v] upgrades a database at version v-1 to v. A database with
# tables but no version (a pre-release layout) is rebuilt instead: the index is disposable.
MIGRATIONS: dict[int, str] = {
    1: _SCHEMA_V1,
    2: _SCHEMA_V2,
    3: _SCHEMA_V3,
    4: _SCHEMA_V4,
    5: _SCHEMA_V5,
    6: _SCHEMA_V6,
    7: _SCHEMA_V7,
    8: _SCHEMA_V8,
    9: _SCHEMA_V9,
    10: _SCHEMA_V10,
    11: _SCHEMA_V11,
}


def slug_of(path: str) -> str:
    """The slug of a file: its name without the extension, lower-case (``Brain:`` comments
    name entries by it)."""
    name = path.rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return stem.lower()


CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS vec(
  model TEXT NOT NULL,
  hash TEXT NOT NULL,
  vec BLOB NOT NULL,
  PRIMARY KEY(model, hash)
) WITHOUT ROWID;
"""


def connect(path: Path | str, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> apsw.Connection:
    """Open a connection with every PRAGMA of the project's contract set (an agent's hook,
    which must return at once, may wait less than ``BUSY_TIMEOUT_MS`` for the write lock).

    A file that is not a SQLite database raises :class:`UserError` with the fix.
    """
    conn = apsw.Connection(str(path))
    deadline = time.monotonic() + busy_timeout_ms / 1000
    pragmas = PRAGMAS | {"busy_timeout": busy_timeout_ms} | _TUNING
    while True:
        try:
            for name, setting in pragmas.items():
                conn.execute(f"PRAGMA {name}={setting}").fetchall()
            return conn
        except apsw.BusyError:
            # switching a brand-new file to WAL while other processes open it too can fail
            # at once, without the busy handler: retry for as long as busy_timeout allows
            if time.monotonic() > deadline:
                conn.close()
                raise
            time.sleep(0.01 + random.random() * 0.04)
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            conn.close()
            raise UserError(
                f"{path} is damaged or not a brainmap database ({exc})",
                hint=f"it is derived data: delete {path} and run `brainmap reindex`",
            ) from exc


@contextmanager
def immediate(conn: apsw.Connection) -> Iterator[None]:
    # BEGIN IMMEDIATE takes the write lock up front; a deferred read-then-write transaction
    # would fail with SQLITE_BUSY instead of waiting for the busy timeout.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if not conn.getautocommit():  # still open: the body or the COMMIT itself failed
            conn.execute("ROLLBACK")
        raise


def value(conn: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    rows = conn.execute(sql, params).fetchall()
    return rows[0][0] if rows else None


def user_version(conn: apsw.Connection) -> int:
    return int(value(conn, "PRAGMA user_version"))


def migrate(conn: apsw.Connection) -> None:
    upgrade_once(
        conn, SCHEMA_VERSION, _upgrade_index, "brain.db",
        "upgrade brainmap, or delete brain.db and run `brainmap reindex`",
    )  # fmt: skip


def upgrade_once(
    conn: apsw.Connection,
    latest: int,
    upgrade: Callable[[apsw.Connection, int], None],
    name: str,
    newer_hint: str,
) -> None:
    """Bring a file at ``PRAGMA user_version`` up to ``latest`` with ``upgrade(conn, from)``,
    once when several processes open it at the same moment; a file of a newer brainmap is
    refused."""
    if user_version(conn) == latest:
        return
    with immediate(conn):  # re-read under the lock: another process may have migrated
        version = user_version(conn)
        if version == latest:
            return
        if version > latest:
            raise UserError(
                f"{name} has schema v{version}, newer than this brainmap (v{latest})",
                hint=newer_hint,
            )
        upgrade(conn, version)
        conn.execute(f"PRAGMA user_version={latest}")


def _upgrade_index(conn: apsw.Connection, version: int) -> None:
    if version == 0 and _has_tables(conn):
        _drop_all(conn)
    conn.create_scalar_function("brainmap_slug", _sql_slug, 1, deterministic=True)
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute(MIGRATIONS[target])


def _sql_slug(*args: Any) -> str:
    return slug_of(str(args[0]))


def _has_tables(conn: apsw.Connection) -> bool:
    rows = conn.execute("SELECT count(*) FROM sqlite_schema WHERE type='table'").fetchall()
    return bool(rows[0][0])


def _drop_all(conn: apsw.Connection) -> None:
    objects = conn.execute(
        "SELECT type, name, sql FROM sqlite_schema "
        "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    # a virtual table drops its shadow tables itself, so drop virtual tables first
    objects.sort(key=lambda o: not str(o[2] or "").upper().startswith("CREATE VIRTUAL"))
    for kind, name, _sql in objects:
        if conn.execute("SELECT 1 FROM sqlite_schema WHERE name = ?", (name,)).fetchall():
            conn.execute(f'DROP {str(kind).upper()} "{name}"')


def batched(items: Sequence[Any], size: int = _SQL_VARS) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def marks(n: int) -> str:
    """``n`` parameters for ``IN (...)``; none is ``NULL`` (PostgreSQL has no empty list, and
    ``IN (NULL)`` holds for no row in either database)."""
    return ",".join("?" * n) if n else "NULL"
