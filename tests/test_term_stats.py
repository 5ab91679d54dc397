"""What the full-text index says as a whole, kept between searches: the text generation, the
shared document frequencies, BM25 scored only where the rarest terms are, and the number of
searches run at once. Real SQLite files in tmp_path, the real model, real threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from brainmap import ftsquery, ops
from brainmap.ftsquery import TermStats, every_word, rarest
from brainmap.store import Filters, Store
from brainmap.store.entries import EntryRepo
from conftest import both_backends, write

WEIGHTS = (4.0, 2.0, 1.0, 1.0)


def _library(root: Path, files: int, rare_every: int = 0) -> Path:
    """``files`` notes that all say "shared"; every ``rare_every``-th also says "quartz"."""
    for n in range(files):
        rare = " quartz quartz" if rare_every and n % rare_every == 0 else ""
        extra = " shared" * (n % 4)
        write(root / f"n{n:04}.md", f"# note {n}\n\nshared words{extra} about topic {n}{rare}.\n")
    return root


def _text_brain(home: Path, root: Path) -> ops.Brain:
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="notes", path=str(root)))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    return brain


def test_the_text_generation_counts_the_rows_written_and_deleted(tmp_path: Path) -> None:
    root = _library(tmp_path / "lib", 3)
    brain = _text_brain(tmp_path / "home", root)
    entries = brain.store.entries
    before = entries.text_generation()
    assert before >= entries.chunk_count() == 3  # each row written counted once at least
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert entries.text_generation() == before  # nothing changed, nothing counted
    write(root / "n0001.md", "# note 1\n\nnew words entirely.\n")
    (root / "n0002.md").unlink()
    ops.reindex(brain, ops.ReindexInput(embed=False))
    # note 1: its old row deleted and its new one written; note 2: its row deleted
    assert entries.text_generation() == before + 3


def test_a_word_first_saved_is_found_by_the_next_search(tmp_path: Path) -> None:
    brain = _text_brain(tmp_path / "home", _library(tmp_path / "lib", 20))
    query = "zyxwvut tsunami"
    assert ops.search(brain, ops.SearchInput(query=query, mode="bm25")).hits == []
    ops.save(brain, ops.SaveInput(title="Zyxwvut", body="The zyxwvut tsunami drill.", force=True))
    hits = ops.search(brain, ops.SearchInput(query=query, mode="bm25")).hits
    assert [h.title for h in hits][:1] == ["Zyxwvut"]


def test_frequencies_are_kept_until_a_share_of_the_index_changed(tmp_path: Path) -> None:
    root = _library(tmp_path / "lib", 300)
    brain = _text_brain(tmp_path / "home", root)
    store = brain.store
    stats = TermStats()
    freqs, total = stats.doc_freqs(store, ["shared", "omega"])
    assert freqs == {"shared": 300, "omega": 0} and total == 300
    write(root / "x1.md", "# x1\n\nshared omega.\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    freqs, total = stats.doc_freqs(store, ["shared", "omega"])
    # one row of 301 changed: "shared" keeps its frequency and the index its count, a word
    # found nowhere is read again
    assert freqs == {"shared": 300, "omega": 1} and total == 300
    for n in range(2, 6):  # more than STALE_SHARE of the index
        write(root / f"x{n}.md", f"# x{n}\n\nshared omega.\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    freqs, total = stats.doc_freqs(store, ["shared", "omega"])
    assert freqs == {"shared": 305, "omega": 5} and total == 305


def test_rarest_terms_hold_at_most_the_rows_given() -> None:
    freqs = {"a": 5, "b": 50, "c": 500, "d": 5000}
    assert rarest(["d", "c", "b", "a"], freqs, 600, 50) == ["a", "b", "c"]
    assert rarest(["d", "a"], freqs, 4, 1) == []  # not even the rarest fits: score every match
    assert rarest(["b", "a"], freqs, 600, 1) == []  # every term fits: nothing to leave out
    assert rarest(["d", "a"], freqs, 600, 50) == []  # 5 chunks are fewer than the 50 wanted


def test_frequencies_stay_right_when_the_cache_overflows(tmp_path: Path) -> None:
    brain = _text_brain(tmp_path / "home", _library(tmp_path / "lib", 12, rare_every=3))
    stats = TermStats(max_terms=3)
    assert stats.doc_freqs(brain.store, ["shared", "quartz", "words"])[0] == {
        "shared": 12, "quartz": 4, "words": 12,
    }  # fmt: skip
    # "shared" is known, "topic" and "note" overflow the cache: known ones keep their count
    assert stats.doc_freqs(brain.store, ["shared", "topic", "note"])[0] == {
        "shared": 12, "topic": 12, "note": 12,
    }  # fmt: skip


def test_bm25_within_the_rare_terms_ranks_as_the_full_query(tmp_path: Path) -> None:
    brain = _text_brain(tmp_path / "home", _library(tmp_path / "lib", 60, rare_every=7))
    entries = brain.store.entries
    full = ["shared", "words", "quartz"]
    everything = entries.bm25(full, Filters(), 100, WEIGHTS)
    within = entries.bm25(full, Filters(), 100, WEIGHTS, within=[["quartz"]])
    rare = set(entries.bm25(["quartz"], Filters(), 100, WEIGHTS))
    assert len(rare) == 9 and set(within) == rare
    assert within == [cid for cid in everything if cid in rare]  # the same scores, in order
    # the join taken when filters name metadata scores the same way
    only = Filters(library_ids=list(entries.library_ids(["notes"]).values()))
    assert entries.bm25(full, only, 100, WEIGHTS, within=[["quartz"]]) == within


def test_a_search_scores_only_the_chunks_of_its_rarest_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = _text_brain(tmp_path / "home", _library(tmp_path / "lib", 60, rare_every=7))
    query = "shared words quartz"
    exact = ops.search(brain, ops.SearchInput(query=query, mode="bm25", limit=5)).hits
    monkeypatch.setattr(ftsquery, "RARE_ROWS", 10)
    brain.cfg.search.candidates = 5  # the 9 chunks of "quartz" are enough candidates
    analysis = brain.searcher.analyser.analyse(query)
    assert analysis.cuts == [[["quartz"]]]
    hits = ops.search(brain, ops.SearchInput(query=query, mode="bm25", limit=5)).hits
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact]
    assert all("quartz" in h.text for h in hits)


def test_every_word_cuts_only_a_large_match_the_rarest_words_first() -> None:
    forms = {"files": ("files", "file"), "list": ("list",), "hidden": ("hidden",)}
    freqs = {"files": 900, "file": 4000, "list": 3000, "hidden": 200}
    terms = ["files", "file", "list", "hidden"]
    assert every_word(terms, forms, freqs, 10_000, 50) == []  # 8,100 chunks: all scored
    assert every_word(terms, forms, freqs, 5_000, 50) == [
        [["hidden"], ["list"], ["files", "file"]],  # every word, the rarest first
        [["hidden"], ["list"]],  # then the two rarest
    ]
    assert every_word(terms, forms, freqs, 5_000, 500) == []  # "hidden" cannot hold 500
    assert every_word(["files", "file"], forms, freqs, 10, 1) == []  # one word: nothing to cut


@both_backends
def test_bm25_within_groups_scores_the_chunks_holding_a_term_of_each(
    backend: str, tmp_path: Path
) -> None:
    brain = _text_brain(tmp_path / "home", _words_library(tmp_path / "lib"))
    entries = brain.store.entries
    terms = ["alpha", "beta", "gamma", "delta"]
    everything = entries.bm25(terms, Filters(), 100, WEIGHTS)
    held = {
        h.chunk_id
        for h in entries.hits(everything).values()
        if ("alpha" in h.text or "gamma" in h.text) and "beta" in h.text
    }
    within = entries.bm25(terms, Filters(), 100, WEIGHTS, within=[["alpha", "gamma"], ["beta"]])
    assert 0 < len(within) < len(everything)
    assert within == [cid for cid in everything if cid in held]  # the same scores, in order
    assert entries.bm25(terms, Filters(), 100, WEIGHTS, within=[[], []]) == everything
    brain.close()


def _words_library(root: Path) -> Path:
    for n in range(60):
        words = ("alpha beta", "alpha gamma", "beta delta")[n % 3]
        write(root / f"n{n:04}.md", f"# note {n}\n\n{words} about topic {n}.\n")
    return root


def test_a_query_of_frequent_words_scores_the_chunks_holding_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query of frequent words only, matching many chunks, scores those holding every word
    (here they are its best, as they mostly are)."""
    brain = _text_brain(tmp_path / "home", _words_library(tmp_path / "lib"))
    query = "alpha beta"
    exact = ops.search(brain, ops.SearchInput(query=query, mode="bm25", limit=10)).hits
    monkeypatch.setattr(ftsquery, "EVERY_WORD_ROWS", 30)  # 40 + 40 chunks hold one of them
    brain.cfg.search.candidates = 10  # the 20 holding both are enough candidates
    assert brain.searcher.analyser.analyse(query).cuts == [[["alpha"], ["beta"]]]
    asked: list[tuple[Any, int]] = []
    bm25 = brain.store.entries.bm25

    def spy(*args: Any, **kwargs: Any) -> list[int]:
        found = bm25(*args, **kwargs)
        asked.append((args[4] if len(args) > 4 else kwargs.get("within"), len(found)))
        return found

    monkeypatch.setattr(brain.store.entries, "bm25", spy)
    hits = ops.search(brain, ops.SearchInput(query=query, mode="bm25", limit=10)).hits
    assert asked == [([["alpha"], ["beta"]], 10)]  # one query, the cut's
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact]
    assert all("alpha beta" in h.text for h in hits)
    # more wanted than hold both: every match is scored after all
    asked.clear()
    brain.cfg.search.candidates = 30
    wider = ops.search(brain, ops.SearchInput(query=query, mode="bm25", limit=30)).hits
    assert asked == [([["alpha"], ["beta"]], 20), (None, 30)]  # the cut held 20 of the 30
    assert len(wider) == 30 and any("alpha gamma" in h.text for h in wider)
    # a rare term's few chunks go first; in many (a large index), after every word
    monkeypatch.setattr(ftsquery, "RARE_ROWS", 25)  # "delta" alone fits
    brain.cfg.search.candidates = 10
    assert brain.searcher.analyser.analyse("alpha beta delta").cuts == [[["delta"]]]
    monkeypatch.setattr(ftsquery, "RARE_FIRST_ROWS", 10)  # its 20 chunks are many
    assert brain.searcher.analyser.analyse("alpha beta delta").cuts == [
        [["delta"], ["alpha"], ["beta"]], [["delta"], ["alpha"]], [["delta"]],
    ]  # fmt: skip


def test_no_more_searches_run_at_once_than_the_slots(
    brain: ops.Brain, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain.cfg.search.concurrency = 2
    brain.save_config()
    gated = ops.Brain(brain.home)
    active = peak = 0
    lock = threading.Lock()
    bm25 = EntryRepo.bm25

    def counted(self: EntryRepo, *args: object, **kwargs: object) -> list[int]:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        try:
            time.sleep(0.05)  # long enough for every thread to try to get in
            return bm25(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            with lock:
                active -= 1

    monkeypatch.setattr(EntryRepo, "bm25", counted)
    errors: list[BaseException] = []

    def search(query: str) -> None:
        try:
            ops.search(gated, ops.SearchInput(query=query))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    queries = ["postgres backup", "redis cache", "cron timezone", "git undo"] * 2
    threads = [threading.Thread(target=search, args=(q,)) for q in queries]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert peak == 2
    gated.close()


def test_an_index_from_before_the_text_generation_gains_it(tmp_path: Path) -> None:
    from brainmap.store.schema import MIGRATIONS, SCHEMA_VERSION, _sql_slug, connect

    path = tmp_path / "brain.db"
    conn = connect(path)
    conn.create_scalar_function("brainmap_slug", _sql_slug, 1, deterministic=True)
    for version in range(1, 8):
        conn.execute(MIGRATIONS[version])
    conn.execute("PRAGMA user_version=7")
    conn.close()
    store = Store(path)
    assert store.db.schema_version() == SCHEMA_VERSION
    assert store.entries.text_generation() == 0
    plan = store.db.rows(
        "EXPLAIN QUERY PLAN SELECT language, count(*) FROM entry GROUP BY language"
    )
    assert any("entry_language" in str(row) for row in plan)
    store.close()


def test_rare_terms_never_cut_the_hits_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _library(tmp_path / "lib", 40)
    write(root / "typo.md", "# typo\n\nshared deploymnet words.\n")
    other = write(tmp_path / "other" / "only.md", "# only\n\nquartzite shared.\n").parent
    brain = _text_brain(tmp_path / "home", root)
    ops.library_add(brain, ops.LibraryAddInput(name="other", path=str(other)))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    monkeypatch.setattr(ftsquery, "RARE_ROWS", 10)
    brain.cfg.search.candidates = 1
    # one chunk holds the rare word: enough candidates, but the rest still come
    hits = ops.search(brain, ops.SearchInput(query="shared words deploymnet", mode="bm25"))
    assert len(hits.hits) == 10 and hits.hits[0].title == "typo"
    # the rare word's only chunk is outside the library searched: every match is scored
    query = "shared words quartzite"
    assert "quartzite" in brain.searcher.analyser.analyse(query).cuts[-1][0]
    found = brain.searcher.search(query, mode="bm25", libraries=["notes"], floor=False)
    assert len(found.hits) == 10  # (no floor: the rarest word is nowhere in this library)
