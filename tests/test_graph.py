"""The knowledge graph: triplets, aliases, code backlinks, git history, hops, stale audit.

Git repositories are real ones, made in the test with pygit2 (several authors, fixed times).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pygit2
import pytest

from brainmap import ops
from brainmap.errors import UserError
from brainmap.graph import GraphReader
from brainmap.search import Hit
from brainmap.store import SCHEMA_VERSION, Store
from conftest import run_cli, write

ANN = ("Ann Example", "ann@example.org")
BOB = ("Bob Builder", "bob@example.org")
CY = ("Cy Coder", "cy@example.org")
T0 = 1_700_000_000


def commit(repo: pygit2.Repository, files: dict[str, str | None], who: tuple[str, str],
           when: int, message: str, *, touch_workdir: bool = True) -> str:  # fmt: skip
    """Write (or delete, for None) files, stage them and commit; return the sha.

    With ``touch_workdir=False`` the commit is made from blobs only, so the files on disk
    keep their old content (as after a fetch that was not checked out).
    """
    root = Path(repo.workdir)
    index = repo.index
    for rel, text in files.items():
        if text is None:
            (root / rel).unlink(missing_ok=True)
            index.remove(rel)
        elif touch_workdir:
            write(root / rel, text)
            index.add(rel)
        else:
            blob = repo.create_blob(text.encode())
            index.add(pygit2.IndexEntry(rel, blob, pygit2.enums.FileMode.BLOB))
    index.write()
    sig = pygit2.Signature(who[0], who[1], when, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, index.write_tree(), parents))


@pytest.fixture
def repo(tmp_path: Path) -> pygit2.Repository:
    """A library in a git repository: three authors, four commits."""
    repo = pygit2.init_repository(str(tmp_path / "repo"))
    commit(
        repo,
        {
            "docs/pool.md": "# Connection pool\n\nPool exhaustion under load.\n",
            "docs/other.md": "# Other\n\nUnrelated text.\n",
        },
        ANN,
        T0,
        "add notes",
    )
    commit(
        repo,
        {
            "docs/pool.md": "# Connection pool\n\nPool exhaustion under load.\n\n"
            "- depends_on [[Postgres]]\n"
        },
        BOB,
        T0 + 86_400,
        "pool: dependency",
    )
    commit(
        repo,
        {"docs/other.md": "# Other\n\nStill unrelated.\n"},
        CY,
        T0 + 2 * 86_400,
        "other: reword",
    )
    commit(repo, {"docs/pool.md": "# Connection pool\n\nPool exhaustion under heavy load.\n\n"
                  "- depends_on [[Postgres]]\n", "src/app.py": "# Brain: pool\nx = 1\n"},
           CY, T0 + 3 * 86_400, "pool: wording; app")  # fmt: skip
    return repo


def _brain(home: Path, root: Path, name: str = "docs") -> ops.Brain:
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(root)))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    return brain


def _search(brain: ops.Brain, query: str, hop: int) -> list[Hit]:
    inp = ops.SearchInput(query=query, mode="bm25", hop=hop, library=["docs"])
    return ops.search(brain, inp).hits


def test_hops_give_file_commits_and_people(home: Path, repo: pygit2.Repository) -> None:
    brain = _brain(home, Path(repo.workdir) / "docs")
    ops.git_import(brain, ops.GitImportInput(libraries=["docs"]))
    (hit,) = [h for h in _search(brain, "exhaustion", 3) if h.path == "pool.md"]
    assert hit.hops is not None
    assert (hit.hops.library, hit.hops.path, hit.hops.file) == (
        "docs",
        "pool.md",
        "file:docs/pool.md",
    )
    head = str(repo.head.target)
    assert hit.source_rev == head  # the commit that last wrote this content
    # hop 2: the commits that changed pool.md, newest first (the one of other.md is not there)
    assert [c.message for c in hit.hops.commits or []] == [
        "pool: wording; app", "pool: dependency", "add notes",
    ]  # fmt: skip
    assert [p.email for p in hit.hops.people or []] == [CY[1], BOB[1], ANN[1]]
    other = next(h for h in _search(brain, "unrelated", 3) if h.path == "other.md")
    assert [p.name for p in other.hops.people or []] == [CY[0], ANN[0]]
    # lower hops stop earlier
    one = next(h for h in _search(brain, "exhaustion", 1) if h.path == "pool.md")
    assert one.hops is not None and one.hops.commits is None and one.hops.people is None
    two = next(h for h in _search(brain, "exhaustion", 2) if h.path == "pool.md")
    assert two.hops is not None and len(two.hops.commits or []) == 3 and two.hops.people is None
    assert _search(brain, "exhaustion", 0)[0].hops is None
    # the walk from a person reaches the commits and files
    walk = ops.neighbors(brain, ops.NeighborsInput(node=f"person:{BOB[1]}", depth=2))
    assert {n.key for n in walk.nodes} >= {"file:docs/pool.md"}
    brain.close()


def test_hop_in_cli_json(home: Path, repo: pygit2.Repository) -> None:
    root = Path(repo.workdir) / "docs"
    run_cli(home, "library", "add", "docs", str(root))
    run_cli(home, "reindex", "--no-embed")
    out = json.loads(run_cli(home, "git-import", "--json").stdout)
    assert out["libraries"][0]["commits"] == 4  # every commit touches docs/
    hits = json.loads(
        run_cli(home, "search", "exhaustion", "-m", "bm25", "--hop", "3", "--json").stdout
    )["hits"]
    assert hits[0]["hops"]["people"][0]["email"] == CY[1]
    text = run_cli(home, "search", "exhaustion", "-m", "bm25", "--hop", "3").stdout
    assert "Cy Coder <cy@example.org>" in text and "pool: dependency" in text


def test_git_import_is_incremental_and_survives_rewrites(
    home: Path, repo: pygit2.Repository
) -> None:
    brain = _brain(home, Path(repo.workdir) / "docs")
    first = ops.git_import(brain, ops.GitImportInput()).libraries
    assert [r.commits for r in first] == [4]
    again = ops.git_import(brain, ops.GitImportInput()).libraries[0]
    assert again.up_to_date and again.commits == 0
    commit(repo, {"docs/new.md": "# New\n"}, ANN, T0 + 4 * 86_400, "new note")
    commit(repo, {"README.md": "outside the library folder\n"}, ANN, T0 + 5 * 86_400, "readme")
    more = ops.git_import(brain, ops.GitImportInput()).libraries[0]
    assert more.commits == 1 and more.versions == 1  # the README commit is not about docs/
    # a rewritten history (HEAD replaced by a different commit) is imported again
    head = repo.head.peel(pygit2.Commit)
    repo.index.add(pygit2.IndexEntry(
        "docs/new.md", repo.create_blob(b"# New, rewritten\n"), pygit2.enums.FileMode.BLOB
    ))  # fmt: skip
    sig = pygit2.Signature(*BOB, T0 + 6 * 86_400, 0)
    replaced = repo.create_commit(
        None, sig, sig, "rewritten", repo.index.write_tree(), [head.parents[0].id]
    )
    repo.head.set_target(replaced)
    rewritten = ops.git_import(brain, ops.GitImportInput()).libraries[0]
    assert rewritten.diverged and rewritten.head == str(replaced)
    assert rewritten.commits == 1  # only the new commit is walked and diffed
    walk = GraphReader(brain.store).neighbors("file:docs/new.md", depth=2)
    assert f"person:{BOB[1]}" in {n.key for n in walk.nodes}
    commits = {k for (k, kind, *_) in brain.store.graph.snapshot()["nodes"] if kind == "commit"}
    assert f"commit:{replaced}" in commits and len(commits) == 6  # 4 + new note + rewritten
    # switching back and forth between branches imports nothing twice
    main = repo.branches.local.create("main-line", head)
    repo.checkout(main, strategy=pygit2.enums.CheckoutStrategy.FORCE)
    back = ops.git_import(brain, ops.GitImportInput()).libraries[0]
    assert back.diverged and back.commits == 0  # the README commit is not about docs/
    # gc drops what HEAD no longer reaches: the commit of the other line of history
    assert ops.gc(brain, ops.NoInput()).unreachable_commits == 1
    commits = {k for (k, kind, *_) in brain.store.graph.snapshot()["nodes"] if kind == "commit"}
    assert f"commit:{replaced}" not in commits and len(commits) == 5
    assert brain.store.graph.orphans() == {"nodes": 0, "edges": 0}
    docs_id = brain.store.entries.library_ids(["docs"])["docs"]
    assert brain.store.graph.git_state(docs_id)[1] == str(head.id)  # type: ignore[index]
    assert brain.store.graph.orphans() == {"nodes": 0, "edges": 0}
    brain.close()


def test_library_in_a_dot_folder_and_unreadable_repository(home: Path, tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "repo"))
    commit(repo, {".notes/a.md": "# A in dot folder\n", "notes/b.md": "# B elsewhere\n"}, ANN,
           T0, "two folders")  # fmt: skip
    brain = _brain(home, tmp_path / "repo" / ".notes")
    (report,) = ops.git_import(brain, ops.GitImportInput()).libraries
    assert report.versions == 1
    assert brain.store.graph.file_versions("file:docs/a.md", 5)
    assert not brain.store.graph.file_versions("file:docs/b.md", 5)
    # git cannot read the history (its objects are gone): a message, never a traceback
    shutil.rmtree(tmp_path / "repo" / ".git" / "objects")
    (tmp_path / "repo" / ".git" / "objects").mkdir()
    commit_ref = tmp_path / "repo" / ".git" / "refs" / "heads"
    assert any(commit_ref.iterdir())
    with pytest.raises(UserError, match="git cannot read"):
        ops.git_import(brain, ops.GitImportInput(libraries=["docs"]))
    failed = ops.git_import(brain, ops.GitImportInput())
    assert failed.libraries == [] and failed.failed and failed.failed[0].startswith("docs: ")
    proc = run_cli(home, "git-import", check=False)
    assert proc.returncode == 1 and "git cannot read" in proc.stderr
    assert "Traceback" not in proc.stderr
    brain.close()


def test_not_a_repository_is_a_clear_error(home: Path, tmp_path: Path) -> None:
    plain = write(tmp_path / "plain" / "a.md", "# A\n").parent
    brain = _brain(home, plain)
    result = ops.git_import(brain, ops.GitImportInput())
    assert result.libraries == [] and "docs" in result.not_git
    with pytest.raises(UserError, match="not inside a git work tree"):
        ops.git_import(brain, ops.GitImportInput(libraries=["docs"]))
    proc = run_cli(home, "git-import", "docs", check=False)
    assert proc.returncode == 1 and "not inside a git work tree" in proc.stderr
    assert "Traceback" not in proc.stderr
    brain.close()


def test_stale_audit_on_disk_and_in_git(home: Path, repo: pygit2.Repository) -> None:
    root = Path(repo.workdir) / "docs"
    brain = _brain(home, root)
    ops.git_import(brain, ops.GitImportInput())
    assert ops.audit(brain, ops.AuditInput()).items == []
    # edited on disk after indexing: stale until reindex
    write(root / "other.md", "# Other\n\nEdited by hand.\n")
    items = ops.audit(brain, ops.AuditInput()).items
    assert [(i.kind, i.path, i.refresh) for i in items] == [
        ("changed_on_disk", "other.md", "brainmap reindex docs")
    ]
    proc = run_cli(home, "audit", "stale", check=False)
    assert proc.returncode == 1 and "changed_on_disk" in proc.stdout
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert ops.audit(brain, ops.AuditInput()).items == []
    other = brain.store.entries.entry(brain.store.entries.find_entry("docs:other.md")[0])  # type: ignore[index]
    assert other["source_rev"].startswith("mtime:")  # type: ignore[index]
    # a commit that changes pool.md in git while the work tree keeps the old content
    newer = commit(repo, {"docs/pool.md": "# Connection pool\n\nRewritten upstream.\n"}, BOB,
                   T0 + 9 * 86_400, "upstream rewrite", touch_workdir=False)  # fmt: skip
    ops.git_import(brain, ops.GitImportInput())
    (item,) = ops.audit(brain, ops.AuditInput()).items
    assert (item.kind, item.path, item.current_rev) == ("changed_in_git", "pool.md", newer)
    assert "reindex docs" in item.refresh
    # checking the new version out and reindexing clears it
    write(root / "pool.md", "# Connection pool\n\nRewritten upstream.\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert ops.audit(brain, ops.AuditInput()).items == []
    row = brain.store.entries.entry(brain.store.entries.find_entry("docs:pool.md")[0])  # type: ignore[index]
    assert row is not None and row["source_rev"] == newer
    # a local edit indexed, then an older staged version committed: the local edit is the
    # newest content, so nothing is stale (checking out would throw the edit away)
    repo.index.add_all()
    write(root / "pool.md", "# Connection pool\n\nv3, not committed.\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    commit(repo, {}, ANN, T0 + 10 * 86_400, "commit what was staged")
    ops.git_import(brain, ops.GitImportInput())
    assert ops.audit(brain, ops.AuditInput()).items == []
    brain.close()


def test_reverify_reminders_and_verify(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    old = (dt.date.today() - dt.timedelta(days=400)).isoformat()
    original = f"---\ntitle: Backups\nowner: ops  # kept\nlast_verified: {old}\n---\nBody.\n"
    write(root / "backups.md", original)
    write(root / "fresh.md", f"---\nlast_verified: {dt.date.today().isoformat()}\n---\nNew.\n")
    write(root / "plain.md", "# Plain\n")
    brain = _brain(home, root)
    (item,) = ops.audit(brain, ops.AuditInput()).items
    assert (item.kind, item.path) == ("reverify", "backups.md")
    assert item.refresh == "check it, then: brainmap verify docs:backups.md"
    result = ops.verify(brain, ops.VerifyInput(ref="docs:backups.md"))
    assert result.status == "verified"
    text = (root / "backups.md").read_text()
    assert text == original.replace(old, dt.date.today().isoformat())
    assert ops.audit(brain, ops.AuditInput()).items == []
    # no frontmatter: one is added; the body is untouched
    ops.verify(brain, ops.VerifyInput(ref="docs:plain.md"))
    assert (root / "plain.md").read_text().endswith("---\n# Plain\n")
    with pytest.raises(UserError):
        ops.verify(brain, ops.VerifyInput(ref="docs:missing.md"))
    brain.close()


def test_links_relations_tags_and_alias_merge(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "postgres.md",
          "---\ntitle: Postgres\naliases: [pgsql]\ntags: [db]\n"
          "relations:\n  runs_on: [Linux]\n---\nThe database. See [[Backups]].\n")  # fmt: skip
    write(root / "app.md", "# App\n\n- depends_on [[PG]]\n- implements [[Auth  spec]]\n")
    write(root / "jobs.md", "# Jobs\n\nWrites to [[postgres]].\n")
    write(root / "README.md", "# README\n\nAbout this folder.\n")
    brain = _brain(home, root)
    assert "entity:readme" not in {k for (k, *_) in brain.store.graph.snapshot()["nodes"]}
    reader = GraphReader(brain.store)
    preds = {(e.subject, e.predicate, e.object) for e in reader.neighbors("Postgres").edges}
    jobs = "entry:" + brain.store.entries.find_entry("docs:jobs.md")[0]  # type: ignore[index]
    app = "entry:" + brain.store.entries.find_entry("docs:app.md")[0]  # type: ignore[index]
    assert (jobs, "links_to", "entity:postgres") in preds
    assert not any(s == app for s, _, _ in preds)  # [[PG]] is not an alias yet
    assert reader.neighbors("PG").center.key == "entity:pg"
    detail = ops.neighbors(brain, ops.NeighborsInput(node="docs:postgres.md")).edges
    got = {(e.predicate, e.object) for e in detail}
    assert {("runs_on", "entity:linux"), ("links_to", "entity:backups"), ("tagged", "tag:db"),
            ("describes", "entity:postgres"), ("from_file", "file:docs/postgres.md")} <= got  # fmt: skip
    line = next(e.line for e in detail if e.predicate == "links_to")
    assert line == 8  # the line of the link in the file
    app_edges = {(e.predicate, e.object) for e in reader.neighbors(app).edges}
    assert ("implements", "entity:auth spec") in app_edges
    # renaming the alias pgsql -> PG merges the two nodes
    text = (root / "postgres.md").read_text().replace("aliases: [pgsql]", "aliases: [PG]")
    write(root / "postgres.md", text)
    ops.reindex(brain, ops.ReindexInput(embed=False))
    merged = reader.neighbors("PG")
    assert merged.center.key == "entity:postgres" and merged.center.aliases == ["entity:pg"]
    assert (app, "depends_on", "entity:postgres") in {
        (e.subject, e.predicate, e.object) for e in merged.edges
    }
    assert "entity:pgsql" not in {k for (k, *_) in brain.store.graph.snapshot()["nodes"]}
    with pytest.raises(UserError):
        ops.neighbors(brain, ops.NeighborsInput(node="entity:nothing-here"))
    # a cut walk returns only edges between the nodes it returns
    for i in range(12):
        write(root / f"extra-{i}.md", f"# Extra {i}\n\n[[Postgres]]\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    cut = ops.neighbors(brain, ops.NeighborsInput(node="Postgres", limit=5))
    kept = {cut.center.key} | {n.key for n in cut.nodes}
    assert cut.truncated and len(cut.nodes) == 5
    assert all(e.subject in kept and e.object in kept for e in cut.edges)
    brain.close()


CODE = {
    "src/db.py": "import pool\n\n# Brain: pool-gotcha\ndef connect(): ...\n",
    "web/app.js": "const x = 1; // Brain: pool-gotcha\n",
    "sql/schema.sql": "CREATE TABLE t(x);\n-- Brain: docs:pool-gotcha\n",
    "ops/deploy.sh": "#!/bin/sh\necho hi  # Brain: deploy-notes\n",
    "src/lib.c": "/* Brain: pool-gotcha */\nint x;\n",
    "src/plain.py": "print('no breadcrumbs here')\n",
    "src/release.py": "# Brain: release-1.2\n",
}


def test_backlinks_and_refs_across_languages(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root / "pool-gotcha.md", "# Pool gotcha\n\nThe pool runs out.\n")
    write(root / "release-1.2.md", "# Release 1.2\n")
    write(root / "release-1.md", "# Release 1\n")
    for rel, text in CODE.items():
        write(root / rel, text)
    brain = _brain(home, root)
    found = ops.backlinks(brain, ops.BacklinksInput(ref="pool-gotcha"))
    assert found.entries == ["docs:pool-gotcha.md"]
    assert sorted((c.file, c.line) for c in found.breadcrumbs) == [
        ("sql/schema.sql", 2), ("src/db.py", 3), ("src/lib.c", 1), ("web/app.js", 1),
    ]  # fmt: skip
    by_entry = ops.backlinks(brain, ops.BacklinksInput(ref="docs:pool-gotcha.md"))
    assert len(by_entry.breadcrumbs) == 4
    refs = ops.refs(brain, ops.RefsInput(file=str(root / "src" / "db.py")))
    assert [(c.ref, c.entries) for c in refs.breadcrumbs] == [
        ("pool-gotcha", ["docs:pool-gotcha.md"])
    ]
    dotted = ops.backlinks(brain, ops.BacklinksInput(ref="release-1.2")).breadcrumbs
    assert [(c.file, c.entries) for c in dotted] == [("src/release.py", ["docs:release-1.2.md"])]
    assert ops.backlinks(brain, ops.BacklinksInput(ref="release-1")).breadcrumbs == []
    # the shell script names an entry that does not exist: doctor reports it, with the line
    doctor = {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}
    assert doctor["orphans"].ok  # a code file without breadcrumbs adds no node
    assert not doctor["breadcrumbs"].ok
    assert doctor["breadcrumbs"].items == ["docs:ops/deploy.sh:2: Brain: deploy-notes"]
    out = run_cli(home, "backlinks", "pool-gotcha").stdout
    assert "docs:web/app.js:1" in out
    out = run_cli(home, "refs", "docs:ops/deploy.sh").stdout
    assert "no such entry" in out
    # saving the entry it means fixes it; editing a comment away removes the edge (and until
    # the next reindex, the audit and doctor say the code file changed)
    write(root / "deploy-notes.md", "# Deploy notes\n")
    write(root / "web" / "app.js", "const x = 1;\n")
    stale = [(i.kind, i.path) for i in ops.audit(brain, ops.AuditInput()).items]
    assert ("code_changed", "web/app.js") in stale
    doctor = {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}
    assert "changed code: web/app.js" in doctor["files:docs"].items
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert ops.audit(brain, ops.AuditInput()).items == []
    doctor = {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}
    assert doctor["breadcrumbs"].ok
    assert len(ops.backlinks(brain, ops.BacklinksInput(ref="pool-gotcha")).breadcrumbs) == 3
    # deleting a code file drops its edges
    (root / "src" / "lib.c").unlink()
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert len(ops.backlinks(brain, ops.BacklinksInput(ref="pool-gotcha")).breadcrumbs) == 2
    brain.close()


def test_an_include_glob_matching_code_keeps_code_files_code(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write(root / "notes" / "pool-gotcha.md", "# Pool gotcha\n\nThe pool runs out.\n")
    write(root / "src" / "db.py", "# Brain: pool-gotcha\nimport os\n")
    write(root / "src" / "compose.yaml", "services:\n  web:\n    ports: ['8000:80']\n")
    write(root / "todo.txt", "# Todo\n\nplain text notes\n")
    out = run_cli(home, "library", "add", "repo", str(root), "--include", "**/*.md",
                  "--include", "**/*.py", "--include", "**/*").stdout  # fmt: skip
    assert "note: --include '**/*.py' matches code files such as x.py: they stay code" in out
    assert "'**/*.md'" not in out and "'**/*'" not in out
    brain = ops.Brain(home)
    ops.reindex(brain, ops.ReindexInput(embed=False))

    def entries(name: str) -> set[str]:
        return set(brain.store.entries.entry_states(brain.store.entries.library_ids([name])[name]))

    assert entries("repo") == {"notes/pool-gotcha.md", "todo.txt"}  # text that is not code
    crumbs = ops.backlinks(brain, ops.BacklinksInput(ref="pool-gotcha")).breadcrumbs
    assert [(c.file, c.line) for c in crumbs] == [("src/db.py", 1)]
    facts = brain.store.facts.assertions()
    assert any(f.subject == "service:src/web" for f in facts)  # config stays config
    # without code globs that take them, included code files are text, as the note says
    added = ops.library_add(brain, ops.LibraryAddInput(name="text", path=str(root), code=[],
                                                       include=["**/*.py"]))  # fmt: skip
    assert added.notes == []
    ops.reindex(brain, ops.ReindexInput(libraries=["text"], embed=False))
    assert entries("text") == {"src/db.py"}
    brain.close()


def test_deleting_an_entry_leaves_no_orphans(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "a.md", "---\ntags: [x, y]\n---\n# A\n\n[[Only From A]] and [[Shared]].\n")
    write(root / "b.md", "# B\n\n[[Shared]]\n")
    brain = _brain(home, root)
    keys = {k for (k, *_) in brain.store.graph.snapshot()["nodes"]}
    assert {"entity:only from a", "entity:shared", "tag:x"} <= keys
    (root / "a.md").unlink()
    ops.reindex(brain, ops.ReindexInput(embed=False))
    keys = {k for (k, *_) in brain.store.graph.snapshot()["nodes"]}
    assert "entity:only from a" not in keys and "tag:x" not in keys
    assert "entity:shared" in keys
    assert all(e[4] != "a" for e in brain.store.graph.snapshot()["edges"])
    assert brain.store.graph.orphans() == {"nodes": 0, "edges": 0}
    doctor = {c.name: c for c in ops.doctor(brain, ops.NoInput()).checks}
    assert doctor["orphans"].ok and doctor["breadcrumbs"].ok
    # removing the library removes its whole graph
    ops.library_remove(brain, ops.LibraryNameInput(name="docs"))
    assert brain.store.graph.counts()["edges"] == 0 and brain.store.graph.counts()["nodes"] == 0
    brain.close()


def test_graph_is_derived_data(home: Path, repo: pygit2.Repository, tmp_path: Path) -> None:
    root = Path(repo.workdir)
    brain = _brain(home, root)
    ops.git_import(brain, ops.GitImportInput())
    before = brain.store.snapshot()
    brain.close()
    for name in ("brain.db", "brain.db-wal", "brain.db-shm"):
        (home / name).unlink(missing_ok=True)
    run_cli(home, "reindex", "--no-embed")
    run_cli(home, "git-import")
    with Store(home / "brain.db") as store:
        after = store.snapshot()
    for key in ("nodes", "edges", "code_files", "entries"):
        assert after[key] == before[key], key


def test_v1_database_is_migrated(home: Path, tmp_path: Path) -> None:
    """An index written by the previous release keeps its text and vectors and gets its
    graph at the next reindex, without re-embedding."""
    import apsw

    from brainmap.store.schema import MIGRATIONS, connect

    root = write(tmp_path / "kb" / "Pool-Gotcha.md", "# Pool\n\nSee [[Postgres]].\n").parent
    brain = _brain(home, root)
    ops.reindex(brain, ops.ReindexInput())  # with its vector
    brain.close()
    conn = connect(home / "brain.db")  # downgrade: the v1 layout with the same rows
    tables = ("library", "entry", "entry_tag", "chunk", "chunk_vec")
    saved = {t: conn.execute(f"SELECT * FROM {t}").fetchall() for t in tables}
    columns = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    conn.close()
    (home / "brain.db").unlink()
    conn = apsw.Connection(str(home / "brain.db"))
    conn.execute(MIGRATIONS[1])
    for table in tables:
        v1 = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        keep = [columns[table].index(c) for c in v1]
        conn.executemany(
            f"INSERT INTO {table}({', '.join(v1)}) VALUES ({', '.join('?' * len(v1))})",
            [[row[i] for i in keep] for row in saved[table]],
        )
    conn.execute("PRAGMA user_version=1")
    conn.close()
    with Store(home / "brain.db") as store:
        assert store.db.schema_version() == SCHEMA_VERSION
        assert store.entries.with_slug("pool-gotcha")[0][2] == "Pool-Gotcha.md"
        assert store.counts()["chunks"] > 0 and store.graph.counts()["edges"] == 0
    out = json.loads(run_cli(home, "reindex", "--json").stdout)
    docs = next(lib for lib in out["libraries"] if lib["library"] == "docs")
    assert (docs["added"], docs["deleted"], docs["updated"]) == (0, 0, 1)
    assert out["embedding"]["embedded"] == out["embedding"]["cached"] == 0  # vectors were kept
    with Store(home / "brain.db") as store:
        touching, _ = store.graph.edges_touching(["file:docs/Pool-Gotcha.md"])
        preds = {e.predicate for _, e in touching}
        assert preds == {"from_file"}
        row = store.entries.entry(store.entries.find_entry("docs:Pool-Gotcha.md")[0])  # type: ignore[index]
        assert row is not None and row["blob"] and row["content_hash"]
        assert store.graph.counts()["edges"] == 3  # from_file, describes, links_to


def test_a_version_replaced_by_a_merge_is_not_newer(home: Path, tmp_path: Path) -> None:
    """main writes v1, a branch v2, main v3; the merge keeps v2: the work tree is clean and
    the indexed v2 is current, although v3 is the newest commit that changed the file."""
    repo = pygit2.init_repository(str(tmp_path / "repo"))
    c1 = commit(repo, {"a.md": "# A\n\nv1\n"}, ANN, T0, "v1")
    branch = repo.create_commit(
        None, pygit2.Signature(*BOB, T0 + 100, 0), pygit2.Signature(*BOB, T0 + 100, 0), "v2",
        _tree_with(repo, repo[c1].tree, "a.md", b"# A\n\nv2\n"), [pygit2.Oid(hex=c1)],
    )  # fmt: skip
    c3 = commit(repo, {"a.md": "# A\n\nv3\n"}, ANN, T0 + 200, "v3")
    write(Path(repo.workdir) / "a.md", "# A\n\nv2\n")
    repo.index.add("a.md")
    repo.index.write()
    sig = pygit2.Signature(*ANN, T0 + 300, 0)
    repo.create_commit("HEAD", sig, sig, "merge, keeping v2", repo.index.write_tree(),
                       [pygit2.Oid(hex=c3), branch])  # fmt: skip
    brain = _brain(home, Path(repo.workdir))
    ops.git_import(brain, ops.GitImportInput())
    row = brain.store.entries.entry(brain.store.entries.find_entry("docs:a.md")[0])  # type: ignore[index]
    assert row is not None and row["source_rev"] == str(branch)
    assert ops.audit(brain, ops.AuditInput()).items == []
    brain.close()


def _tree_with(repo: pygit2.Repository, base: pygit2.Tree, name: str, data: bytes) -> pygit2.Oid:
    builder = repo.TreeBuilder(base)
    builder.insert(name, repo.create_blob(data), pygit2.enums.FileMode.BLOB)
    return builder.write()


def test_changed_globs_import_the_history_again(home: Path, repo: pygit2.Repository) -> None:
    commit(repo, {"docs/notes.txt": "plain text\n"}, ANN, T0 + 5 * 86_400, "a text file")
    brain = _brain(home, Path(repo.workdir) / "docs")
    ops.git_import(brain, ops.GitImportInput())
    assert not brain.store.graph.file_versions("file:docs/notes.txt", 5)
    brain.cfg.libraries[-1].include.append("**/*.txt")
    brain.save_config()
    again = ops.git_import(brain, ops.GitImportInput()).libraries[0]
    assert not again.up_to_date and again.commits == 5
    assert brain.store.graph.file_versions("file:docs/notes.txt", 5)
    brain.close()


def test_tree_diff_reads_zero_padded_folder_modes(tmp_path: Path) -> None:
    from brainmap.gitlog import _TreeDiff

    repo = pygit2.init_repository(str(tmp_path / "r"))
    blob = repo.create_blob(b"x")
    inner = repo.odb.write(pygit2.enums.ObjectType.TREE, b"100644 x.md\0" + blob.raw)
    padded = repo.odb.write(pygit2.enums.ObjectType.TREE, b"040000 dir\0" + inner.raw)
    assert _TreeDiff(repo).changed(None, padded) == [("dir/x.md", str(blob))]


def test_neighbors_says_when_edges_were_left_out(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    write(root / "design.md", "# Design\n")
    write(root / "big.py", "".join(f"x{i} = {i}  # Brain: design\n" for i in range(60)))
    write(root / "small.py", "# Brain: design\n")
    brain = _brain(home, root)
    cut = ops.neighbors(brain, ops.NeighborsInput(node="docs:design.md", limit=2))
    found = {n.key for n in cut.nodes}
    assert cut.truncated or {"file:docs/big.py", "file:docs/small.py"} <= found
    whole = ops.neighbors(brain, ops.NeighborsInput(node="docs:design.md", limit=200))
    assert {"file:docs/big.py", "file:docs/small.py"} <= {n.key for n in whole.nodes}
    assert not whole.truncated
    brain.close()


def test_an_entry_indexed_meanwhile_is_updated_not_duplicated(home: Path, tmp_path: Path) -> None:
    """A reindex took its snapshot before a save indexed the same file: its put_entry(new=True)
    must update the entry, not fail on the chunk ids or duplicate the edges."""
    from brainmap.collectors.files import ProjectFinder
    from brainmap.indexer import LibraryReport, _index_file, scan

    root = write(tmp_path / "kb" / "a.md", "# A\n\nSee [[B]].\n").parent
    brain = _brain(home, root)
    lib = brain.cfg.library("docs")
    library_id = brain.store.entries.library_ids(["docs"])["docs"]
    found = next(f for f in scan(root, lib.paths) if f.rel == "a.md")
    before = brain.store.graph.snapshot()["edges"]
    problem = _index_file(brain.cfg, brain.store, lib, library_id, found, None, True,
                          LibraryReport("docs"), False, ProjectFinder(root, "docs"))  # fmt: skip
    assert problem is None
    assert brain.store.graph.snapshot()["edges"] == before
    brain.close()


def test_alias_chains_and_cycles_merge(home: Path, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    write(root / "c.md", "---\ntitle: Postgres\naliases: [PostgreSQL]\n---\nThe db.\n")
    write(root / "b.md", "---\ntitle: PostgreSQL\naliases: [pg]\n---\nSame thing.\n")
    write(root / "x.md", "---\ntitle: Ping\naliases: [Pong]\n---\n")
    write(root / "y.md", "---\ntitle: Pong\naliases: [Ping]\n---\n")
    write(root / "a.md", "# A\n\n[[pg]] and [[Pong]]\n")
    brain = _brain(home, root)
    reader = GraphReader(brain.store)
    walk = reader.neighbors("pg")
    assert walk.center.key == "entity:postgres"  # pg -> postgresql -> postgres
    assert set(walk.center.aliases) == {"entity:pg", "entity:postgresql"}
    a = "entry:" + brain.store.entries.find_entry("docs:a.md")[0]  # type: ignore[index]
    assert (a, "links_to", "entity:postgres") in {
        (e.subject, e.predicate, e.object) for e in walk.edges
    }
    assert reader.neighbors("Pong").center.key == reader.neighbors("Ping").center.key
    brain.close()
