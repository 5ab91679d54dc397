"""The open brain every op works on: a home's config and, per thread, a store and a searcher.

Light on purpose: hooks open a brain on every tool call, so the searcher, the notes and the
embedding model load only when an op asks for them.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from brainmap import config as config_mod
from brainmap.config import ensure_home, resolve_home
from brainmap.errors import UserError
from brainmap.store import Store

log = logging.getLogger("brainmap.ops")

if TYPE_CHECKING:
    from brainmap.derive import Derived, MapSettler
    from brainmap.ftsquery import TermStats
    from brainmap.notes import Notes
    from brainmap.search import Searcher, SearchSlots
    from brainmap.store.cache import VectorCache
    from brainmap.vectorindex import VectorIndex
    from brainmap.writeworker import WriteWorker


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
        self._search_slots: SearchSlots | None = None
        #: set in a long-lived process (:meth:`settle_map_later`), else single-file writes
        #: refresh the library map before they return
        self.map_settler: MapSettler | None = None
        #: set in ``brainmap serve`` (:meth:`serve_writes`): the child that runs its note writes
        self.write_worker: WriteWorker | None = None
        self._held_cache: VectorCache | None = None

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
                if self._search_slots is None:
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

    def changed(self, libraries: Sequence[str], *, embed: bool = True) -> Derived:
        """The after-change step of a single-file writer whose change is safe on disk (save,
        ingest, verify, the diary, a hook): :func:`brainmap.derive.after_change_quietly`."""
        from brainmap.derive import after_change_quietly  # a search never needs it

        return after_change_quietly(
            self.cfg, self.store, libraries, embed=embed, settler=self.map_settler
        )

    def serve_writes(self, *, worker_now: bool = True, hand_writes: bool = False) -> None:
        """Set a long-lived process that writes (``brainmap serve``, ``brainmap mcp``) up so
        that its saves cost its searches little: their passages embedded by a child process
        (:func:`brainmap.queryvectors.start_passage_worker`, started now or at the first
        save), the library map settled in the background, the vector cache held open.

        With ``hand_writes`` (a server that many clients search at once), the note writes
        run whole in a child process at the lowest priority (:mod:`brainmap.writeworker`),
        started now; the rest stays set up for the writes it cannot take."""
        import sys

        from brainmap.queryvectors import start_passage_worker

        if hand_writes and not self.cfg.store_url and sys.platform != "win32":
            from brainmap.writeworker import HUNG_AFTER_S, WriteWorker

            if self.write_worker is None:
                log_path = self.home / "logs" / "writeworker.log"
                # a save may ask the reasoner for its labels, within its timeout, twice
                patience = HUNG_AFTER_S + 2 * self.cfg.reasoner.timeout_s
                self.write_worker = WriteWorker(self.home, log_path, patience_s=patience)
                self.write_worker.start()
            worker_now = False  # the passage worker only for a write the child cannot take
        start_passage_worker(self.cfg, now=worker_now)
        self.settle_map_later()
        self.hold_vector_cache()

    def settle_map_later(self, delay_s: float | None = None) -> None:
        """Let the library map of single-file writes settle in the background, within
        ``delay_s`` (default :data:`brainmap.derive.MAP_SETTLE_S`): a long-lived process,
        ``brainmap serve`` or ``brainmap mcp``."""
        from brainmap.derive import MAP_SETTLE_S, MapSettler

        delay = MAP_SETTLE_S if delay_s is None else delay_s
        before, self.map_settler = (
            self.map_settler,
            MapSettler(self.cfg, lambda: self.store, delay_s=delay),
        )
        if before is not None:
            before.close()

    def hold_vector_cache(self) -> None:
        """Keep a connection to the vector cache open until :meth:`close` (a long-lived
        process that writes). The last connection to a SQLite file in WAL mode to close
        checkpoints it and deletes its log, holding Python's GIL for 1-7 ms: each save opens
        and closes the cache twice, and every search of the server would wait that long."""
        from brainmap.store.cache import VectorCache

        if self._held_cache is None:
            try:
                self._held_cache = VectorCache(self.cfg.cache_path)
            except Exception:  # the saves work without it, each closing its own connection
                log.warning("vector cache not held open", exc_info=True)

    def share_search_connections(self) -> None:
        """Run the searches of every thread on connections of the search slots' own (a
        server: :class:`brainmap.search.SearchSlots`); closed with the brain."""
        from brainmap.search import search_slots

        with self._lock:
            if self._search_slots is None:
                self._search_slots = search_slots(self.cfg)
            self._search_slots.share_connections(self._open_shared)

    def _open_shared(self) -> Store:
        store = self._open_store()
        with self._lock:
            self._stores.append(store)
        return store

    def settle_map(self) -> None:
        """Refresh the library map now if writes of this process wait for it, or wait for
        their refresh under way (a reader of the map sees its own writes), those of the
        writer process included."""
        if self.write_worker is not None:
            try:
                self.write_worker.settle()
            except Exception:  # derived data: the reader gets the map as it is
                log.warning("library map not refreshed", exc_info=True)
        if self.map_settler is not None:
            try:
                self.map_settler.flush()
            except Exception:  # derived data: the reader gets the map as it is
                log.warning("library map not refreshed", exc_info=True)

    def save_config(self) -> None:
        config_mod.save(self.cfg)

    def close(self) -> None:
        """Refresh the library map if writes wait for it, then close every thread's
        connection (call when no operation is running)."""
        worker, self.write_worker = self.write_worker, None
        if worker is not None:
            worker.close()  # it refreshes the map of its writes first
        settler, self.map_settler = self.map_settler, None
        if settler is not None:
            try:
                settler.close()
            except Exception:  # derived data: the next writer or reindex catches up
                log.warning("library map not refreshed", exc_info=True)
        with self._lock:
            stores, self._stores, self._idle = self._stores, [], []
            slots, self._search_slots = self._search_slots, None
        if slots is not None:
            slots.forget_connections()  # closed below
        for store in stores:
            store.close()
        self._local = threading.local()
        held, self._held_cache = self._held_cache, None
        if held is not None:
            held.close()  # the last one: the cache's log is written back and deleted

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
