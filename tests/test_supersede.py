"""Supersession and status: superseded, retired and archived entries leave default search,
hooks and facts evidence; `supersede` writes both files or neither."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from brainmap import ops
from brainmap.errors import UserError
from brainmap.hooks import file_items, prompt_context, session_context
from brainmap.project import resolve
from conftest import write

OLD = "example:gotchas/compose-port-order.md"
QUERY = "compose ports host container order"


def _ids(brain: ops.Brain, query: str, mode: str = "hybrid", **kw: object) -> dict[str, str]:
    result = ops.search(
        brain,
        ops.SearchInput.model_validate({"query": query, "mode": mode, "limit": 50, **kw}),
    )
    return {h.id: h.status for h in result.hits}


def _new(brain: ops.Brain, library: Path) -> str:
    write(
        library / "gotchas" / "compose-ports-v2.md",
        "---\ntype: gotcha\ntags: [docker]\n---\n# Compose ports, revisited\n\n"
        "Ports in compose files are HOST:CONTAINER; quote them in YAML.\n",
    )
    ops.reindex(brain, ops.ReindexInput())
    return ops.get(brain, ops.GetInput(ref="example:gotchas/compose-ports-v2.md")).id


def test_supersede_writes_both_sides_and_leaves_default_search(
    brain: ops.Brain, library: Path
) -> None:
    old = ops.get(brain, ops.GetInput(ref=OLD)).id
    new = _new(brain, library)
    for mode in ("bm25", "vector", "hybrid"):
        assert old in _ids(brain, QUERY, mode)
    result = ops.supersede(brain, ops.SupersedeInput(old=OLD, new=new))
    assert result.status == "superseded"
    assert (
        'supersedes: ["compose-port-order"]'
        in (library / "gotchas" / "compose-ports-v2.md").read_text()
    )
    assert (
        'superseded_by: "compose-ports-v2"'
        in (library / "gotchas" / "compose-port-order.md").read_text()
    )
    for mode in ("bm25", "vector", "hybrid"):
        assert old not in _ids(brain, QUERY, mode), mode
        assert _ids(brain, QUERY, mode, include_inactive=True).get(old) == "superseded", mode
    got = ops.get(brain, ops.GetInput(ref=old))
    assert got.status == "superseded" and [o["id"] for o in got.superseded_by] == [new]
    replacing = ops.get(brain, ops.GetInput(ref=new))
    assert replacing.status == "active" and [o["id"] for o in replacing.supersedes] == [old]
    # a full rebuild from the files says the same
    (brain.home / "brain.db").unlink()
    brain.close()
    again = ops.Brain(brain.home)
    ops.reindex(again, ops.ReindexInput(embed=False))
    assert ops.get(again, ops.GetInput(ref=old)).status == "superseded"
    # deleting NEW un-supersedes OLD (its own superseded_by names nothing indexed then)
    (library / "gotchas" / "compose-ports-v2.md").unlink()
    ops.reindex(again, ops.ReindexInput(embed=False))
    back = ops.get(again, ops.GetInput(ref=old))
    assert back.status == "active" and back.superseded_by == []
    assert any("names no indexed entry" in w for w in back.warnings)
    assert old in _ids(again, QUERY, "bm25")
    again.close()


def test_a_failed_second_write_leaves_the_first_file_as_it_was(
    brain: ops.Brain, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = _new(brain, library)
    new_file = library / "gotchas" / "compose-ports-v2.md"
    old_dir = library / "old"
    old_dir.mkdir()
    shutil.move(library / "gotchas" / "cron-timezone.md", old_dir / "cron-timezone.md")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    before = new_file.read_bytes()
    old_dir.chmod(0o555)  # OLD's folder is read-only: its atomic write cannot make a temp file
    if os.geteuid() == 0:  # root writes there anyway: the disk is full for OLD's folder
        from brainmap import notes, safefile

        def full(root: Path, target: Path, data: bytes) -> bool:
            if target.parent == old_dir:
                raise OSError(28, "No space left on device")
            return safefile.atomic_write(root, target, data)

        monkeypatch.setattr(notes, "atomic_write", full)
    try:
        with pytest.raises(UserError):
            ops.supersede(brain, ops.SupersedeInput(old="example:old/cron-timezone.md", new=new))
    finally:
        old_dir.chmod(0o755)
    assert new_file.read_bytes() == before
    assert ops.get(brain, ops.GetInput(ref=new)).supersedes == []
    assert ops.get(brain, ops.GetInput(ref="example:old/cron-timezone.md")).status == "active"


def test_save_supersedes_and_retired_and_archived_leave_search(
    brain: ops.Brain, library: Path
) -> None:
    old = ops.get(brain, ops.GetInput(ref=OLD)).id
    saved = ops.save(
        brain,
        ops.SaveInput(
            title="Compose ports: HOST first, CONTAINER second",
            body="In compose files ports read HOST:CONTAINER order; quote them.",
            type="gotcha", tags=["docker"], library="example", supersedes=OLD,
        ),
    )  # fmt: skip
    assert saved.status == "saved"
    assert ops.get(brain, ops.GetInput(ref=old)).status == "superseded"
    assert old not in _ids(brain, QUERY)
    # retired by its frontmatter
    cron = library / "gotchas" / "cron-timezone.md"
    cron_id = ops.get(brain, ops.GetInput(ref="example:gotchas/cron-timezone.md")).id
    assert cron_id in _ids(brain, "cron timezone", "bm25")
    cron.write_text("---\nstatus: retired\n---\n" + cron.read_text())
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert cron_id not in _ids(brain, "cron timezone", "bm25")
    assert _ids(brain, "cron timezone", "bm25", include_inactive=True)[cron_id] == "retired"
    # archived: moved under archive/ (as `brainmap prune --archive` does)
    (library / "archive").mkdir()
    shutil.move(library / "gotchas" / "http-429-backoff.md", library / "archive" / "429.md")
    ops.reindex(brain, ops.ReindexInput())
    archived = ops.get(brain, ops.GetInput(ref="example:archive/429.md"))
    assert archived.status == "archived"
    for mode in ("bm25", "vector", "hybrid"):
        assert archived.id not in _ids(brain, "HTTP 429 retry backoff", mode)
    assert archived.id in _ids(brain, "HTTP 429 retry backoff", "bm25", include_inactive=True)


def test_hooks_never_inject_superseded_entries(brain: ops.Brain, library: Path) -> None:
    new = _new(brain, library)
    project = resolve(brain.cfg, "example")
    old = ops.get(brain, ops.GetInput(ref=OLD))
    code = library / "app.py"
    write(code, "# Brain: compose-port-order\nPORTS = 1\n")
    before = file_items(brain.cfg, brain.store, project, code, writing=False)
    assert old.id in {i.hit.entry_id for i in before}
    line = f"- [gotcha] {old.title}"  # the session's gotchas (the map may still name it)
    assert line in session_context(brain.cfg, brain.store, project)
    ops.supersede(brain, ops.SupersedeInput(old=OLD, new=new))
    after = file_items(brain.cfg, brain.store, project, code, writing=True, new_text="ports")
    assert old.id not in {i.hit.entry_id for i in after}
    assert line not in session_context(brain.cfg, brain.store, project)
    assert old.path not in prompt_context(brain.cfg, brain.store, project, QUERY)


COMPOSE = 'services:\n  web:\n    image: example/web:1.2\n    ports:\n      - "8000:8000"\n'
README = "# Shop\n\nStart it with `docker compose up`, then open http://localhost:8000.\n"


def test_facts_from_a_retired_entry_no_longer_confirm(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", README)
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="lab", path=str(lib)))
    ops.collect(brain, ops.CollectInput(embed=False))

    def confidence() -> str:
        for row in brain.store.facts.assertions():
            fact = ops.facts.fact_of(row)
            if (fact.subject, fact.predicate, fact.object) == (
                "service:shop/web", "publishes", "port:8000"):  # fmt: skip
                return fact.confidence
        return "none"

    assert confidence() == "confirmed"
    write(lib / "shop" / "README.md", "---\nstatus: retired\n---\n" + README)
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert confidence() == "hypothesis"
    brain.close()


def test_gui_marks_superseded_entries(brain: ops.Brain, library: Path) -> None:
    from fastapi.testclient import TestClient

    from brainmap.server import create_app

    new = _new(brain, library)
    ops.supersede(brain, ops.SupersedeInput(old=OLD, new=new))
    old = ops.get(brain, ops.GetInput(ref=OLD)).id
    app = create_app(brain)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/entry/{old}").text
    assert '<span class="badge">superseded</span>' in page
    assert "Superseded by" in page and "Compose ports, revisited" in page
