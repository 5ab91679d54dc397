"""The same brain on both backends: brain.db and PostgreSQL give the same answers, and a brain
moves from one to the other without re-embedding."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from brainmap import ops
from brainmap.embedders import model_id_of
from brainmap.store.records import VectorRows
from conftest import EXAMPLE, ROOT, both_backends, dialogue, free_port, run_cli, write

MODES = ("bm25", "vector", "hybrid")


def _golden() -> list[str]:
    data = yaml.safe_load((ROOT / "tests" / "golden.yaml").read_text(encoding="utf-8"))
    return [q["query"] for q in data["queries"]]


def _answers(brain: ops.Brain, queries: list[str]) -> dict[tuple[str, str], list[object]]:
    """Each query's hits in each mode (library, path, line, match level)."""
    return {key: [hit[:4] for hit in hits] for key, hits in _scored(brain, queries).items()}


def _scored(brain: ops.Brain, queries: list[str]) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    out: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for query in queries:
        for mode in MODES:
            result = brain.searcher.search(query, mode=mode, limit=10)
            out[(query, mode)] = [
                (h.library, h.path, h.line_start, h.match, h.score) for h in result.hits
            ]
    return out


def _rows(vectors: VectorRows) -> list[bytes]:
    width = len(vectors.vectors) // max(len(vectors.ids), 1)
    return [vectors.vectors[i * width : (i + 1) * width] for i in range(len(vectors.ids))]


def _brain(home: Path, library: Path, cache: Path) -> ops.Brain:
    home.mkdir(parents=True)
    shutil.copyfile(cache, home / "vectors.db")
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="example", path=str(library)))
    return brain


def test_both_backends_give_the_same_hits_in_every_mode(
    tmp_path: Path, warm_cache: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = [*_golden(), "undo the last commit", '"database is locked"', "密钥", "zzqx"]
    library = tmp_path / "library"
    shutil.copytree(EXAMPLE, library)
    # a token of combining marks only (a Lao tone mark alone) folds to nothing
    (library / "lao.md").write_text("# ລາວ\n\nຢູ່ ູ່ abc ທີ່\n", encoding="utf-8")
    queries += ["ຢູ່ abc"]
    sqlite = _brain(tmp_path / "sqlite", library, warm_cache)
    ops.reindex(sqlite, ops.ReindexInput())
    expected = _scored(sqlite, queries)
    sqlite.close()
    monkeypatch.setenv("BRAINMAP_DB", pg_url)
    postgres = _brain(tmp_path / "postgres", library, warm_cache)
    ops.reindex(postgres, ops.ReindexInput())
    got = _scored(postgres, queries)
    assert {k: [h[:4] for h in v] for k, v in got.items()} == {
        k: [h[:4] for h in v] for k, v in expected.items()
    }
    for key, hits in expected.items():  # the staleness decay moves with the clock
        assert [h[4] for h in got[key]] == pytest.approx([h[4] for h in hits], rel=1e-4), key
    assert sum(len(hits) for hits in expected.values()) > 3 * len(queries)  # real answers
    postgres.close()


def test_a_brain_moves_to_postgres_without_embedding_anything(
    brain: ops.Brain, home: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DESIGN: the vector cache outlives the index; pointing a home at a new backend and
    reindexing embeds nothing again."""
    before = _answers(brain, ["take back the commit I just made", "cache redis"])
    chunks = brain.store.counts()["chunks"]
    model = model_id_of(brain.cfg.embedder)
    vectors = brain.store.vectors.load(model)
    brain.close()
    monkeypatch.setenv("BRAINMAP_DB", pg_url)
    moved = ops.Brain(home)
    report = ops.reindex(moved, ops.ReindexInput())
    assert report.embedding is not None
    assert report.embedding.embedded == 0 and report.embedding.cached == chunks
    assert moved.store.counts()["chunks"] == chunks
    # the same float32s come back out of pgvector (read in its binary form)
    moved_vectors = moved.store.vectors.load(model)
    assert len(vectors.ids) == chunks and len(moved_vectors.ids) == chunks
    # chunk ids may differ between the two indexes: compare the vectors as a multiset
    assert sorted(_rows(vectors)) == sorted(_rows(moved_vectors))
    assert _answers(moved, ["take back the commit I just made", "cache redis"]) == before
    moved.close()


@both_backends
def test_doctor_and_stats_on_each_backend(backend: str, brain: ops.Brain) -> None:
    report = ops.doctor(brain, ops.NoInput())
    checks = {c.name: c for c in report.checks}
    assert report.ok, [(c.name, c.detail, c.fix) for c in report.checks if not c.ok]
    assert checks["schema"].ok and checks["integrity"].ok
    if backend == "postgres":
        assert (
            "PostgreSQL 16" in checks["server"].detail and "pgvector 0." in checks["server"].detail
        )
    else:
        assert "server" not in checks
    stats = ops.stats(brain, ops.NoInput())
    assert stats.db_bytes > 0 and stats.schema_version == brain.store.db.latest_schema


def test_the_cli_takes_db_and_says_why_it_cannot_connect(
    brain: ops.Brain, home: Path, pg_url: str
) -> None:
    brain.close()
    run_cli(home, "--db", pg_url, "reindex")
    found = run_cli(home, "--db", pg_url, "doctor", "--json")
    assert json.loads(found.stdout)["checks"][3]["name"] == "server"
    down = f"postgresql://team:hunter2-secret@127.0.0.1:{free_port()}/brain"
    failed = run_cli(home, "--db", down, "search", "commit", check=False)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "cannot connect to PostgreSQL" in failed.stderr and "hunter2" not in failed.stderr
    wrong = run_cli(home, "--db", "mysql://x/y", "search", "commit", check=False)
    assert wrong.returncode == 2 and "postgresql://" in wrong.stderr


def test_one_machine_never_replaces_another_machines_library(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every home has a global library called "brain": on a shared index the first machine's
    holds the name, and another machine's reindex leaves it alone instead of deleting every
    note its own folder lacks."""
    monkeypatch.setenv("BRAINMAP_DB", pg_url)
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    run_cli(alice, "save", "Rotate the signing keys", "-b", "Every 90 days.", "--force",
            env={"BRAINMAP_MACHINE": "alice-laptop"})  # fmt: skip
    reindexed = run_cli(bob, "reindex", "--no-embed", "--json", check=False,
                        env={"BRAINMAP_MACHINE": "bob-desk"})  # fmt: skip
    assert reindexed.returncode == 1  # a problem to report, the other libraries indexed
    problems = json.loads(reindexed.stdout)["problems"]
    assert any("alice-laptop" in p and "'brain'" in p for p in problems), problems
    found = run_cli(
        alice, "search", "signing keys", "--json", env={"BRAINMAP_MACHINE": "alice-laptop"}
    )
    hit = json.loads(found.stdout)["hits"][0]
    assert hit["title"] == "Rotate the signing keys"
    # bob finds alice's note, and where it is: her machine, her folder
    seen = run_cli(bob, "search", "signing keys", "--json", env={"BRAINMAP_MACHINE": "bob-desk"})
    source = json.loads(seen.stdout)["hits"][0]["source"]
    assert source == f"alice-laptop:{alice / 'brain' / hit['path']}" == hit["source"]
    got = run_cli(bob, "get", hit["id"], "--json", env={"BRAINMAP_MACHINE": "bob-desk"})
    assert json.loads(got.stdout)["source"] == source
    refused = run_cli(bob, "save", "Mine", "-b", "text", "--force", check=False,
                      env={"BRAINMAP_MACHINE": "bob-desk"})  # fmt: skip
    assert refused.returncode == 1 and "alice-laptop" in refused.stderr
    assert "Traceback" not in refused.stderr


@both_backends
def test_a_dialogues_window_vectors_on_each_backend(
    backend: str, brain: ops.Brain, tmp_path: Path
) -> None:
    """A long run of turns is stored with its windows' vectors, read back (pgvector's binary
    form and bytea) and searched as one chunk each, at the best of them."""
    folder = tmp_path / "chats"
    write(folder / "may.md", dialogue(40))
    ops.library_add(brain, ops.LibraryAddInput(name="chats", path=str(folder)))
    ops.reindex(brain, ops.ReindexInput())
    rows = brain.store.vectors.load(brain.searcher.model)
    assert len(rows.ids) > len(set(rows.ids)) and rows.ids == sorted(rows.ids)  # in a row
    hits = brain.searcher.search(
        "who adopted a kitten from the shelter", mode="vector", libraries=["chats"], limit=10
    ).hits
    assert hits and len({h.chunk_id for h in hits}) == len(hits)
    assert all(h.path == "may.md" for h in hits)
