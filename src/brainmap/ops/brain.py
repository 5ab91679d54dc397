"""The open brain every op works on: a home's config and, per thread, a store and a searcher.

Light on purpose: hooks open a brain on every tool call, so the searcher, the notes and the
embedding model load only when an op asks for them.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from brainmap import config as config_mod
from brainmap.config import ensure_home, resolve_home
from brainmap.errors import UserError
from brainmap.store import Store

if TYPE_CHECKING:
    from brainmap.ftsquery import TermStats
    from brainmap.notes import Notes
    from brainmap.search import Searcher
    from brainmap.vectorindex import VectorIndex


class Brain:
    """An open home: its config, and per thread a store and a warm searcher.

    The store (one SQLite connection) and the searcher belong to the thread that asked for
    them, so that a server's worker threads read in parallel; the vector matrix and the
    embedding model are shared by all threads.
    """

    def __init__(
        self, home: str | Path | None = None, *, busy_timeout_ms: int | None = None
    ) -> None:
        """``busy_timeout_ms``: how long a write waits for another writer (hooks wait less
        than the default, which the store sets)."""
        self.home = resolve_home(home)
        self._busy_timeout_ms = busy_timeout_ms
        self.cfg, self.created = ensure_home(self.home)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._stores: list[Store] = []  # every connection opened, for close()
        self._idle: list[Store] = []  # connections of threads that ended
        self._vectors: VectorIndex | None = None
        self._term_stats: TermStats | None = None
        self._search_slots: threading.Semaphore | None = None

    @property
    def store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            with self._lock:
                store = self._idle.pop() if self._idle else None
            if store is None:
                store = self._open_store()
                with self._lock:
                    self._stores.append(store)
            self._local.store = store
            # server worker threads come and go: a dead thread's connection serves the next
            # thread. (Closing it would not free its file: SQLite keeps the descriptor of a
            # connection closed while others hold locks on the file, until they all close.)
            weakref.finalize(threading.current_thread(), self._idle.append, store)
        return store

    def _open_store(self) -> Store:
        """A new connection to the index: PostgreSQL when a URL is set, else brain.db."""
        if self.cfg.store_url:
            from brainmap.store.postgres.store import PgStore, is_postgres_url

            if not is_postgres_url(self.cfg.store_url):
                raise UserError(
                    "$BRAINMAP_DB must be a postgresql:// URL",
                    hint="unset it to use brain.db in the home",
                )
            return PgStore(self.cfg.store_url)
        if self._busy_timeout_ms is None:
            return Store(self.cfg.db_path)
        return Store(self.cfg.db_path, self._busy_timeout_ms)

    @property
    def searcher(self) -> Searcher:
        searcher: Searcher | None = getattr(self._local, "searcher", None)
        if searcher is None:
            from brainmap.embedders import model_id_of
            from brainmap.ftsquery import TermStats
            from brainmap.search import Searcher, search_slots
            from brainmap.vectorindex import VectorIndex

            with self._lock:
                if self._vectors is None:
                    self._vectors = VectorIndex(model_id_of(self.cfg.embedder))
                    self._term_stats = TermStats()
                    self._search_slots = search_slots(self.cfg)
            searcher = Searcher(
                self.cfg, self.store, self._vectors, self._term_stats, self._search_slots
            )
            self._local.searcher = searcher
        return searcher

    @property
    def notes(self) -> Notes:
        from brainmap.notes import Notes

        return Notes(self.cfg, self.searcher)

    def save_config(self) -> None:
        config_mod.save(self.cfg)

    def close(self) -> None:
        """Close every thread's connection (call when no operation is running)."""
        with self._lock:
            stores, self._stores, self._idle = self._stores, [], []
        for store in stores:
            store.close()
        self._local = threading.local()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
