"""Indexing: incremental updates, idempotence, hostile files, crashes, rebuilds.

RELIABILITY 1, 9, 10, 11, 15 (checkpoint), 17.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from brainmap import config, ops
from brainmap.indexer import ReindexReport
from conftest import EXAMPLE, both_backends, dialogue, drop_index, open_index, run_cli, write


def _reindex(brain: ops.Brain, **kw: object) -> ReindexReport:
    return ops.reindex(brain, ops.ReindexInput(**kw))  # type: ignore[arg-type]


def _paths(brain: ops.Brain) -> set[str]:
    return {row[2] for row in brain.store.snapshot()["entries"]}


def _no_orphans(brain: ops.Brain) -> None:
    assert set(brain.store.orphans().values()) == {0}  # text, vectors and graph
    assert brain.store.integrity() == []


def test_index_example_library(brain: ops.Brain) -> None:
    counts = brain.store.counts()
    assert counts["entries"] == len(list(EXAMPLE.rglob("*.md")))
    assert counts["chunks"] >= counts["entries"]
    assert counts["vectors"] == counts["chunks"]
    assert brain.store.vectors.pending_count(brain.searcher.model) == 0
    _no_orphans(brain)


def test_edit_rename_delete_are_reflected(brain: ops.Brain, library: Path) -> None:
    """RELIABILITY 10: no orphans in entries, FTS, vectors after external changes."""
    note = library / "gotchas" / "cron-timezone.md"
    note.write_text(note.read_text() + "\nAlso check the daylight saving switch: zebrafish.\n")
    report = _reindex(brain).libraries[-1]
    assert (report.updated, report.added, report.deleted) == (1, 0, 0)
    assert (
        brain.searcher.search("zebrafish", mode="bm25").hits[0].path == "gotchas/cron-timezone.md"
    )

    note.rename(library / "gotchas" / "cron-tz.md")
    report = _reindex(brain).libraries[-1]
    assert (report.added, report.deleted) == (1, 1)
    hits = brain.searcher.search("zebrafish", mode="bm25").hits
    assert [h.path for h in hits] == ["gotchas/cron-tz.md"]

    shutil.rmtree(library / "patterns")
    report = _reindex(brain).libraries[-1]
    assert report.deleted == 3
    assert not any(p.startswith("patterns/") for p in _paths(brain))
    assert all(not h.path.startswith("patterns/") for h in brain.searcher.search("nginx").hits)
    _no_orphans(brain)
    assert brain.store.counts()["vectors"] == brain.store.counts()["chunks"]


def test_same_title_notes_are_distinct_entries(brain: ops.Brain, library: Path) -> None:
    write(library / "a" / "note.md", "# Same title\n\nfirst kumquat\n")
    write(library / "b" / "note.md", "# Same title\n\nsecond kumquat\n")
    _reindex(brain)
    hits = brain.searcher.search("kumquat", mode="bm25").hits
    assert sorted(h.path for h in hits) == ["a/note.md", "b/note.md"]
    assert len({h.id for h in hits}) == 2


def test_unchanged_library_changes_nothing(brain: ops.Brain, library: Path) -> None:
    """RELIABILITY 9: no file rewritten, no row changed, frontmatter bytes untouched."""
    files = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in library.rglob("*.md")}
    before = brain.store.snapshot()
    time.sleep(2.1)  # past the racy window of the first index
    _reindex(brain)  # re-hashes entries written within the racy window, once
    changes = brain.store.db.conn.total_changes()
    report = _reindex(brain).libraries[-1]
    assert brain.store.db.conn.total_changes() == changes
    assert report.unchanged == report.files and report.added == report.updated == 0
    assert brain.store.snapshot() == before
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in library.rglob("*.md")} == files


def test_touch_without_change_is_not_reparsed(brain: ops.Brain, library: Path) -> None:
    note = library / "es" / "cache-redis.md"
    before = brain.store.snapshot()
    os.utime(note, (time.time() + 5, time.time() + 5))
    report = _reindex(brain).libraries[-1]
    assert report.updated == 0 and report.unchanged == report.files
    assert brain.store.snapshot() == before


def test_full_reindex_re_embeds_nothing(brain: ops.Brain) -> None:
    before = brain.store.snapshot()
    report = _reindex(brain, full=True, embed=False)
    assert report.libraries[-1].updated == report.libraries[-1].files
    assert brain.store.snapshot() == before  # FTS rows rewritten, vectors kept
    assert brain.store.vectors.pending_count(brain.searcher.model) == 0


def test_hostile_files_never_crash(brain: ops.Brain, library: Path, tmp_path: Path) -> None:
    """RELIABILITY 17: any encoding, any frontmatter, a 50 MB file, symlink loops."""
    (library / "binary.md").write_bytes(b"\x00\x01\x02PNG" * 100)
    (library / "latin1.md").write_bytes("# Crème brûlée\n\nrecette française\n".encode("cp1252"))
    (library / "utf16.md").write_bytes("# 標題\n\n内容\n".encode("utf-16"))
    write(library / "bad-yaml.md", "---\ntitle: [oops\n---\n# Still here\n\nbody text\n")
    write(
        library / "weird-yaml.md", "---\n? [complex, key]\n: !!binary aGVsbG8=\ntags: 12\n---\nok\n"
    )
    write(library / "nested.md", "---\n" + "a:\n " * 200 + "b: 1\n---\ndeep\n")
    with open(library / "huge.md", "wb") as handle:
        handle.write(b"# Huge\n" + b"lorem ipsum dolor sit amet\n" * 2_000_000)  # ~54 MB
    os.symlink(library / "loop.md", library / "loop.md")
    (library / "dir").mkdir()
    os.symlink(library / "dir", library / "dir" / "self")
    outside = tmp_path / "outside"
    write(outside / "secret.md", "# Secret\n\nnever index me\n")
    os.symlink(outside / "secret.md", library / "escape.md")
    os.symlink(outside, library / "escape-dir")
    os.symlink(library / "missing-target.md", library / "dangling.md")
    os.mkfifo(library / "pipe.md")  # reading it would block forever
    (library / "bad-name-\udcff.md").write_text("# odd name\n")  # not valid UTF-8 on disk
    write(library / "alias-bomb.md", "---\nx: &a [*a]\n---\n# Alias bomb\n\nstill indexed\n")

    report = _reindex(brain).libraries[-1]
    skipped = {path: reason for _, path, reason in brain.store.entries.skipped()}
    assert "binary" in skipped["binary.md"]
    assert "max_file_mb" in skipped["huge.md"]
    assert "outside" in skipped["escape.md"]
    assert "looping" in skipped["loop.md"]
    assert "dangling.md" in skipped
    assert skipped["pipe.md"] == "not a regular file"
    assert skipped["bad-name-\\xff.md"] == "file name is not valid UTF-8"
    assert brain.searcher.search("still indexed", mode="bm25").hits[0].path == "alias-bomb.md"
    assert report.skipped == len(skipped)
    assert all(h.path != "escape.md" for h in brain.searcher.search("never index me").hits)
    assert not any(p.startswith("escape-dir/") for p in _paths(brain))
    assert brain.searcher.search("brûlée", mode="bm25").hits[0].path == "latin1.md"
    assert brain.searcher.search("内容", mode="bm25").hits[0].path == "utf16.md"
    assert brain.searcher.search("Still here", mode="bm25").hits[0].path == "bad-yaml.md"
    warnings = {path: w for _, path, w in brain.store.entries.entry_warnings()}
    assert any("broken frontmatter" in w for w in warnings["bad-yaml.md"])
    assert any("Windows-1252" in w for w in warnings["latin1.md"])
    doctor = ops.doctor(brain, ops.NoInput())
    listed = next(c for c in doctor.checks if c.name == "skipped").items
    assert any(item.startswith("example:huge.md") for item in listed)
    assert any(item.startswith("example:bad-yaml.md") for item in listed)
    _no_orphans(brain)
    # skipped files are not read again while unchanged; one that becomes readable is indexed
    again = _reindex(brain).libraries[-1]
    assert (again.skipped, again.added, again.updated, again.deleted) == (report.skipped, 0, 0, 0)
    (library / "binary.md").write_text("# Fixed\n\nnow text\n")
    _reindex(brain)
    assert "binary.md" not in {p for _, p, _ in brain.store.entries.skipped()}
    assert brain.searcher.search("now text", mode="bm25").hits[0].path == "binary.md"


def test_a_file_of_one_huge_line_gives_bounded_chunks_and_small_answers(
    home: Path, tmp_path: Path
) -> None:
    """Issue 14.5: a multi-MB file on one line (the size limit raised) was one chunk of that
    size, and a search answered megabytes of JSON."""
    lib = tmp_path / "lib"
    line = " ".join(f"filler{i % 3001}" for i in range(700_000)) + " needleword end"
    write(lib / "huge.md", line + "\n")
    write(lib / "base64.md", "QUJD" * 500_000)
    brain = ops.Brain(home)
    brain.cfg.index.max_file_mb = 20
    config.save(brain.cfg)
    ops.library_add(brain, ops.LibraryAddInput(name="lib", path=str(lib)))
    ops.reindex(brain, ops.ReindexInput(libraries=["lib"], embed=False))
    budget = brain.cfg.index.chunk_tokens * 3  # characters: estimate_tokens counts 3 a token
    for name in ("huge.md", "base64.md"):
        chunks = ops.get(brain, ops.GetInput(ref=f"lib:{name}")).chunks
        assert len(chunks) > 100
        assert all(c.line_start == c.line_end == 1 for c in chunks)
        assert max(len(c.text) for c in chunks) <= budget
    parts = ops.get(brain, ops.GetInput(ref="lib:huge.md")).chunks
    assert " ".join(c.text for c in parts).split() == line.split()
    brain.close()
    out = run_cli(home, "search", "needleword", "--mode", "bm25", "-n", "20", "--json")
    assert len(out.stdout) < 30_000
    hits = json.loads(out.stdout)["hits"]
    assert hits[0]["path"] == "huge.md" and "needleword" in hits[0]["text"]


def test_wal_is_checkpointed_after_bulk_work(brain: ops.Brain, library: Path) -> None:
    """RELIABILITY 15: after a bulk reindex the WAL does not keep the data."""
    for i in range(300):
        write(library / "bulk" / f"n{i}.md", f"# Note {i}\n\n" + "filler text " * 50)
    _reindex(brain, embed=False)
    wal = Path(f"{brain.cfg.db_path}-wal")
    assert not wal.exists() or wal.stat().st_size < 64 * 1024


def test_search_in_another_process_while_reindex_runs(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "big"
    for i in range(4000):
        write(lib / f"d{i // 100}" / f"n{i}.md", f"# Note {i}\n\nalpha beta gamma {i}\n")
    run_cli(home, "library", "add", "big", str(lib))
    run_cli(home, "reindex", "--no-embed")
    for path in list(lib.rglob("*.md"))[:3500]:
        path.write_text(path.read_text() + "\nchanged delta\n")
    writer = subprocess.Popen(
        [sys.executable, "-m", "brainmap", "--home", str(home), "reindex", "--no-embed"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    searched = 0
    while writer.poll() is None:
        proc = run_cli(home, "search", "alpha", "--mode", "bm25", "--json")
        assert json.loads(proc.stdout)["hits"]
        searched += 1
    assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
    assert searched >= 1


def _make_library(root: Path, count: int, seed: int) -> None:
    rng = random.Random(seed)
    words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega".split()
    for i in range(count):
        body = "\n\n".join(
            f"## Part {j}\n\n" + " ".join(rng.choice(words) for _ in range(rng.randint(5, 30)))
            for j in range(rng.randint(1, 3))
        )
        links = f"See [[Topic {i % 4}]].\n\n- depends_on [[Note {(i + 1) % count}]]\n"
        write(
            root / f"f{i % 7}" / f"note-{i}.md",
            f"---\ntags: [t{i % 5}]\n---\n# Note {i}\n\n{body}\n\n{links}",
        )
        if i % 10 == 0:  # code that names notes: breadcrumb edges are graph rows too
            write(root / "src" / f"m{i}.py", f"x = {i}  # Brain: note-{i}\n")


def _comparable(home: Path, url: str | None = None) -> dict[str, object]:
    s = open_index(home, url)
    try:
        assert s.integrity() == []
        snap = s.snapshot()
        return {k: v for k, v in snap.items() if k != "libraries"}
    finally:
        s.close()


def test_a_read_worker_builds_the_same_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large (re)index reads files in a worker process: the index it builds is the one a
    single process builds, problems included, and a dead worker loses nothing."""
    from brainmap import indexer

    lib = tmp_path / "lib"
    _make_library(lib, 60, seed=3)
    (lib / "f1" / "latin1.md").write_bytes(b"# Caf\xe9\n\nno UTF-8 here\n")
    (lib / "f2" / "empty.md").write_bytes(b"")
    monkeypatch.setattr(indexer, "PARALLEL_AFTER", 5)  # in-process first, then the worker
    monkeypatch.setattr(indexer, "READ_BATCH", 4)
    started: list[object] = []
    start = indexer._ReadWorker.start

    def counted() -> object:
        worker = start()
        started.append(worker)
        return worker

    monkeypatch.setattr(indexer._ReadWorker, "start", staticmethod(counted))
    built, reports = {}, {}
    for name, workers in (("one", 0), ("two", 1)):
        brain = ops.Brain(tmp_path / name)
        brain.cfg.index.read_workers = workers
        ops.library_add(brain, ops.LibraryAddInput(name="lib", path=str(lib)))
        only = ops.ReindexInput(libraries=["lib"], embed=False)
        reports[name] = ops.reindex(brain, only).libraries[0]
        brain.close()
        built[name] = _comparable(tmp_path / name)
    one, two = reports["one"], reports["two"]
    assert one.added == 62 and (one.added, one.skipped, one.chunks) == (
        two.added, two.skipped, two.chunks,
    )  # fmt: skip
    assert len(started) == 1 and started[0] is not None  # the worker did read
    assert built["one"] == built["two"]
    # a worker that dies mid-run: what it had not answered is read here
    brain = ops.Brain(tmp_path / "two")
    dying = start()
    assert dying is not None
    dying.proc.kill()
    dying.proc.wait()
    monkeypatch.setattr(indexer._ReadWorker, "start", staticmethod(lambda: dying))
    full = ops.ReindexInput(libraries=["lib"], full=True, embed=False)
    report = ops.reindex(brain, full).libraries[0]
    assert report.updated == 62 and report.skipped == one.skipped, report
    brain.close()
    assert _comparable(tmp_path / "two") == built["one"]


@pytest.mark.slow
@both_backends
def test_kill_during_reindex_then_reindex_equals_fresh_build(
    backend: str, tmp_path: Path, warm_cache: Path, request: pytest.FixtureRequest
) -> None:
    """RELIABILITY 1: kill -9 at random moments and at injected points (mid-transaction, in
    the text pass and in the embedding pass); the next reindex repairs everything."""
    lib = tmp_path / "lib"
    _make_library(lib, 80, seed=1)
    fresh = tmp_path / "fresh"
    run_cli(fresh, "library", "add", "lib", str(lib))
    run_cli(fresh, "reindex")
    expected = _comparable(fresh)
    assert expected["vectors"]

    crashed = tmp_path / "crashed"
    # on PostgreSQL the crashed home gets a database of its own
    url = request.getfixturevalue("postgres").database() if backend == "postgres" else ""
    env = {**os.environ, "BRAINMAP_DB": url} if url else dict(os.environ)
    run_cli(crashed, "library", "add", "lib", str(lib), env={"BRAINMAP_DB": url} if url else {})
    shutil.copyfile(fresh / "vectors.db", crashed / "vectors.db")  # embeddings from cache: fast
    injector = Path(__file__).with_name("crashing.py")
    # on PostgreSQL fewer crashes, for the suite's time (the same kinds of point)
    points = ("text:1", "text:40", "text:77", "embed:1", "embed:3")
    kills = 5
    if backend == "postgres":
        points, kills = ("text:1", "text:77", "embed:1"), 3
    for point in points:
        proc = subprocess.run(
            [sys.executable, str(injector), point, "--home", str(crashed), "reindex"],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 137, proc.stderr
        # a crash mid-transaction leaves what was committed, never a broken database
        open_index(crashed, url or None).close()
    # random moments: each run starts from nothing (so there is real work) and is killed
    # somewhere between start-up and the end of an uninterrupted run
    command = [sys.executable, "-m", "brainmap", "--home", str(crashed), "reindex"]
    drop_index(crashed, url or None)
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, env=env)
    duration = time.monotonic() - started
    rng = random.Random(5)
    landed = 0
    for _ in range(kills):
        drop_index(crashed, url or None)
        proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        time.sleep(rng.uniform(0.15, 0.7) * duration)
        proc.send_signal(signal.SIGKILL)
        landed += proc.wait() == -signal.SIGKILL  # still running: the kill landed mid-run
    assert landed >= kills // 2 + 1  # (a run may finish early on a quiet machine; most must not)
    run_cli(crashed, "reindex", env={"BRAINMAP_DB": url} if url else {})
    assert _comparable(crashed, url or None) == expected


@both_backends
def test_rebuild_after_deleting_the_index_hits_the_cache(
    backend: str, brain: ops.Brain, home: Path
) -> None:
    """RELIABILITY 11 / DESIGN: delete the index, rebuild: same results, nothing re-embedded."""
    queries = ["how to revert a commit", "copia di sicurezza", "密钥", "caché"]
    before = [[(h.path, h.line_start) for h in brain.searcher.search(q).hits] for q in queries]
    chunks = brain.store.counts()["chunks"]
    brain.close()
    drop_index(home)
    gc = ops.gc(ops.Brain(home), ops.NoInput())  # gc between delete and rebuild keeps the cache
    assert gc.cache_entries_removed == 0 and gc.cache_kept_because
    rebuilt = ops.Brain(home)
    report = ops.reindex(rebuilt, ops.ReindexInput())
    assert report.embedding is not None
    assert report.embedding.embedded == 0 and report.embedding.cached == chunks
    after = [[(h.path, h.line_start) for h in rebuilt.searcher.search(q).hits] for q in queries]
    assert after == before
    rebuilt.close()


def test_library_remove_drops_rows_not_files(brain: ops.Brain, library: Path) -> None:
    files = sorted(p.read_bytes() for p in library.rglob("*.md"))
    removed = ops.library_remove(brain, ops.LibraryNameInput(name="example"))
    assert removed.entries_removed == len(files)
    assert brain.store.counts()["entries"] == 0 and brain.store.counts()["vectors"] == 0
    assert sorted(p.read_bytes() for p in library.rglob("*.md")) == files
    _no_orphans(brain)


def test_unreadable_folder_keeps_its_entries(
    brain: ops.Brain, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder that cannot be read is reported, and its entries are not taken as deleted.

    Tests run as root here, and root reads any folder, so the permission error is raised by
    a wrapper around os.open for that one folder (what the OS would do for a normal user).
    """
    write(library / "locked" / "inner.md", "# Inner\n\nbehind the lock\n")
    _reindex(brain, embed=False)
    real_open = os.open

    def open_(path: str, flags: int, *args: object, **kw: object) -> int:
        if flags & os.O_DIRECTORY and Path(path).name == "locked":
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr("brainmap.safefile.os.open", open_)
    report = _reindex(brain, embed=False).libraries[-1]
    assert (report.deleted, report.skipped) == (0, 1)
    hits = brain.searcher.search("behind the lock", mode="bm25").hits
    assert hits[0].path == "locked/inner.md"
    skipped = brain.store.entries.skipped()
    assert ("example", "locked", "cannot read folder: Permission denied") in skipped
    monkeypatch.undo()
    report = _reindex(brain, embed=False).libraries[-1]
    assert report.skipped == 0 and brain.store.entries.skipped() == []


class _StandInEmbeddings(http.server.BaseHTTPRequestHandler):
    """A stand-in for a remote OpenAI-compatible embeddings service (which cannot run here):
    real HTTP and the real response shape; it rejects any batch containing the word POISON."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"]
        if any("POISON" in t for t in texts):
            payload, status = {"error": {"message": "input rejected"}}, 400
        else:
            data = []
            for i, text in enumerate(texts):
                digest = hashlib.sha256(text.encode()).digest()
                data.append({"index": i, "embedding": [b / 255 + 0.01 for b in digest[:8]]})
            payload, status = {"object": "list", "data": data}, 200
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


def test_a_rejected_chunk_does_not_hold_up_the_others(home: Path, tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StandInEmbeddings)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        lib = tmp_path / "lib"
        for i in range(40):
            word = "POISON" if i == 3 else "fine"
            write(lib / f"n{i:02d}.md", f"# Note {i}\n\n{word} text number {i}\n")
        brain = ops.Brain(home)
        brain.cfg.embedder = f"openai:http://127.0.0.1:{server.server_port}/v1#stand-in"
        ops.library_add(brain, ops.LibraryAddInput(name="lib", path=str(lib)))
        report = ops.reindex(brain, ops.ReindexInput()).embedding
        assert report is not None and report.error is None
        assert (report.embedded, report.failed, report.pending) == (39, 1, 1)
        again = ops.reindex(brain, ops.ReindexInput()).embedding  # retried, still rejected
        assert again is not None and (again.embedded, again.failed) == (0, 1)
        # a rejected turn is in its unit's whole text and in its windows, several texts of
        # one chunk: that is still one chunk rejected, not the model down
        turns = dialogue(40).splitlines()
        turns[7] += " POISON"
        write(lib / "a-chat.md", "\n".join(turns) + "\n")
        for i in range(3):
            write(lib / f"z{i}.md", f"# Later {i}\n\nfine text {i}\n")
        third = ops.reindex(brain, ops.ReindexInput()).embedding
        assert third is not None and third.error is None
        chat = brain.store.db.rows(
            "SELECT count(*) FROM chunk c JOIN entry e ON e.id = c.entry_id "
            "WHERE e.path = 'a-chat.md'"
        )[0][0]
        assert chat >= 3 and (third.failed, third.pending) == (2, 2)  # the chat's first, n03
        assert third.embedded == 3 + chat - 1
        brain.close()
    finally:
        server.shutdown()
