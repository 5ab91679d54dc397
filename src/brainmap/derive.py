"""The one after-change step: what follows any change of the brain, in one place.

Every writer (reindex, watch, save, ingest, verify, collect, git-import, library removal,
gc, the diary) changes index rows first and then calls :func:`after_change` once with the
libraries it touched (adding a library changes nothing that derives: it has no rows yet). Each derived part is judged by its own state, so that a part that was
interrupted, or failed, is caught up by the next call, whoever makes it:

- facts: a library's assertions are re-paired when its observations changed;
- the library map: blocks whose library changed are recomputed, with their partners' (a
  long-lived process settles the map of its single-file writes in the background, at most
  once per :data:`MAP_SETTLE_S`: :class:`MapSettler`);
- the MCP instructions follow the map's generation by themselves (``mcp_server``);
- diary rollups (on request): completed weeks and months whose days changed are rewritten.

Whole-library writers (reindex, collect, git-import, library removal, gc, a map recompute)
also hold the home's write lock while they run: :func:`changing` takes it and runs the step.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from brainmap import libmap
from brainmap.config import Config
from brainmap.facts.pairing import pair_library
from brainmap.keys import EntryRef
from brainmap.safefile import file_lock
from brainmap.store import Store

log = logging.getLogger("brainmap.derive")


@dataclass
class Derived:
    """What the after-change step brought up to date."""

    facts_paired: list[str] = field(default_factory=list)  # libraries re-paired
    map: list[str] = field(default_factory=list)  # libraries given a new map block
    rollups: list[str] = field(default_factory=list)  # rollup files written (library:path)


def after_change(
    cfg: Config,
    store: Store,
    libraries: Sequence[str] | None,
    *,
    embed: bool = True,
    removed: Sequence[str] = (),
    rollups: bool = False,
    settler: MapSettler | None = None,
) -> Derived:
    """Bring what derives from ``libraries`` (all when None) up to date after a change. It
    sees the whole index, whoever's call changed it: what derives is everybody's.

    ``removed`` names libraries that are gone (their partners lose the bridges to them);
    ``embed=False`` never loads the embedding model (map sentences keep their vectors when
    unchanged, the others wait for the next call that embeds); ``rollups`` also writes the
    diary rollups of completed periods; ``settler`` refreshes the map later, in the
    background (``Derived.map`` then stays empty).
    """
    with store.db.seeing(None):
        derived = Derived()
        if libraries is None:
            names = [lib.name for lib in cfg.libraries]
        else:
            names = [cfg.library(name).name for name in dict.fromkeys(libraries)]
        if rollups:
            derived.rollups = roll_up_completed(cfg, store, embed=embed)
            written = map(EntryRef.parse, derived.rollups)
            names += [ref.library for ref in written if ref.library not in names]
        ids = store.entries.library_ids(names)
        derived.facts_paired = [
            name for name in names if name in ids and pair_library(store, ids[name])
        ]
        if names and (settler is None or not settler.add(names, embed=embed)):
            libs = [cfg.library(name) for name in names]
            derived.map = libmap.refresh(cfg, store, libs, embed=embed)
        if removed:
            # the libraries whose bridges name a removed one lose them (their sentences stay)
            gone = set(removed)
            partners = [b.library for b in libmap.blocks(store) if gone & set(b.bridged_libraries)]
            partners = [name for name in partners if name not in gone]
            if partners:
                report = libmap.recompute(cfg, store, partners, embed=False)
                derived.map += [name for name in report.recomputed if name not in derived.map]
        return derived


def roll_up_completed(
    cfg: Config, store: Store, *, embed: bool, lock_timeout_s: float | None = None
) -> list[str]:
    """Write the diary rollups of completed periods whose days changed, and index them;
    returns them as ``library:path``."""
    from brainmap import diary  # only reindex and SessionStart roll up
    from brainmap.indexer import index_files

    written = diary.roll_up(cfg, completed_only=True, lock_timeout_s=lock_timeout_s)
    if written:
        lib = cfg.library(written[0].library)
        index_files(cfg, store, lib, [w.path for w in written], embed=embed)
    return [f"{w.library}:{w.path}" for w in written]


def after_change_quietly(
    cfg: Config,
    store: Store,
    libraries: Sequence[str],
    *,
    embed: bool = True,
    settler: MapSettler | None = None,
) -> Derived:
    """:func:`after_change` for writers whose change is already safe on disk (save, ingest,
    verify, the diary): a failure here is logged, and the next call catches up."""
    try:
        return after_change(cfg, store, libraries, embed=embed, settler=settler)
    except Exception:  # derived data: the note is written and indexed
        log.warning("derived data not refreshed for %s", ", ".join(libraries), exc_info=True)
        return Derived()


def write_lock(home: Path) -> AbstractContextManager[None]:
    """One whole-library writer per home at a time (other processes wait); searches and
    single-file writers (save, the diary) never wait for it."""
    return file_lock(home / ".reindex.lock")


@contextmanager
def changing(
    cfg: Config,
    store: Store,
    libraries: Sequence[str] | None,
    *,
    embed: bool = True,
    removed: Sequence[str] = (),
    rollups: bool = False,
) -> Iterator[Derived]:
    """Hold the write lock while a whole-library writer runs, then run the after-change step
    (still under the lock). The :class:`Derived` yielded is filled in when the block ends
    without an error; after an error the next writer's step catches up."""
    with write_lock(cfg.home):
        derived = Derived()
        yield derived
        done = after_change(cfg, store, libraries, embed=embed, removed=removed, rollups=rollups)
        vars(derived).update(vars(done))


#: how long a long-lived process lets the library map of its single-file writes wait
MAP_SETTLE_S = 5.0


class MapSettler:
    """The library map of a long-lived process's single-file writes (save, ingest, verify,
    the diary), refreshed in the background at most once per ``delay_s``.

    A block is computed from its whole library (entity degrees, bridges, sizes): tens of
    milliseconds of a server's CPU at a few thousand notes, which every save a second would
    take from the searches. The map is an overview for the next session, so the saves of
    ``delay_s`` share one refresh. Readers in this process call :meth:`flush` first (they see
    their own writes, even one whose refresh is under way); other processes see the map at
    most ``delay_s`` late, and a process that dies first leaves it to the next writer of the
    library or ``reindex``, which judge the blocks by their state. ``store`` gives the
    calling thread's store.
    """

    def __init__(
        self, cfg: Config, store: Callable[[], Store], *, delay_s: float = MAP_SETTLE_S
    ) -> None:
        self._cfg = cfg
        self._store = store
        self._delay_s = delay_s
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # one refresh at a time
        self._pending: dict[str, bool] = {}  # library -> whether to embed its sentence
        self._timer: threading.Timer | None = None
        self._closed = False

    def add(self, libraries: Sequence[str], *, embed: bool) -> bool:
        """Refresh the map of ``libraries`` within ``delay_s``; False once closed (the
        caller refreshes it itself)."""
        with self._lock:
            if self._closed:
                return False
            for name in libraries:
                self._pending[name] = self._pending.get(name, False) or embed
            if self._timer is None:
                self._timer = threading.Timer(self._delay_s, self._settle)
                self._timer.daemon = True
                self._timer.start()
        return True

    def pending(self) -> list[str]:
        """The libraries whose map waits for the next refresh."""
        with self._lock:
            return list(self._pending)

    def flush(self) -> list[str]:
        """Refresh what waits, now, on the calling thread (after a refresh under way on
        another); returns the libraries given a new block. What a failed refresh was for
        waits again, for the next write, read or exit."""
        with self._refreshing:
            with self._lock:
                pending, self._pending, self._timer = self._pending, {}, None
            known = {lib.name: lib for lib in list(self._cfg.libraries)}  # one may go meanwhile
            libs = [known[name] for name in pending if name in known]
            if not libs:
                return []
            try:
                store = self._store()
                with store.db.seeing(None):  # a reader's flush: the blocks see every library
                    return libmap.refresh(self._cfg, store, libs, embed=any(pending.values()))
            except BaseException:
                with self._lock:
                    for name, embed in pending.items():
                        self._pending[name] = self._pending.get(name, False) or embed
                raise

    def close(self) -> None:
        """Refresh what waits and refresh nothing later (writers then refresh the map
        themselves)."""
        with self._lock:
            self._closed = True
            timer = self._timer
        if timer is not None:
            timer.cancel()
        self.flush()

    def _settle(self) -> None:
        try:
            self.flush()
        except Exception:  # derived data: the next writer or reindex catches up
            log.warning("library map not refreshed", exc_info=True)
