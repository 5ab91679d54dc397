"""The one after-change step: every writer leaves facts and the library map current.

Each case changes what facts or the map derive from through one writer, then checks that
the assertions were re-paired from the observations as they are now and that no map block
is behind its library. A writer that forgot the step fails here. Real files, real SQLite,
real git.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pygit2
import pytest

from brainmap import derive, libmap, ops
from brainmap.facts.pairing import due_digest
from brainmap.ops.hook import HookEvent, hook
from brainmap.watcher import watch
from conftest import serving, write
from test_graph import ANN, T0, commit

NOTE = "# Web\n\nOpen http://localhost:{port} to see the web service.\n"


def _current(brain: ops.Brain) -> None:
    """Facts paired from the observations as they are, and no map block behind."""
    store = brain.store
    for row in store.entries.libraries():
        paired = store.facts.pairing_digest(row.id)
        observed = due_digest(store, row.id)
        never = paired is None and not sum(store.facts.observation_counts(row.id).values())
        assert never or paired == observed, row.name
    assert libmap.stale(brain.cfg, store) == []


def _home(home: Path, tmp_path: Path, warm_cache: Path) -> ops.Brain:
    home.mkdir(parents=True)
    shutil.copyfile(warm_cache, home / "vectors.db")
    brain = ops.Brain(home)
    brain.cfg.hooks.background_embed = False
    for name in ("web", "ops"):
        folder = tmp_path / name
        write(folder / "README.md", f"# {name}\n\nThe {name} notes about [[Postgres]].\n")
        write(folder / "notes" / "web.md", NOTE.format(port=8000))
        ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(folder), code=None))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    _current(brain)
    return brain


def _reindex(brain: ops.Brain, tmp_path: Path) -> None:
    write(tmp_path / "web" / "notes" / "web.md", NOTE.format(port=8001))
    ops.reindex(brain, ops.ReindexInput(libraries=["web"], embed=False))


def _save(brain: ops.Brain, tmp_path: Path) -> None:
    result = ops.save(brain, ops.SaveInput(title="Admin", body=NOTE.format(port=9000),
                                           library="web", force=True))  # fmt: skip
    assert result.status == "saved"


def _ingest(brain: ops.Brain, tmp_path: Path) -> None:
    result = ops.ingest(brain, ops.IngestInput(text=NOTE.format(port=9001), library="web",
                                               force=True))  # fmt: skip
    assert result.status == "saved"


def _merge(brain: ops.Brain, tmp_path: Path) -> None:
    found = brain.store.entries.find_entry("web:notes/web.md")
    assert found is not None
    result = ops.save(brain, ops.SaveInput(title="Later", body=NOTE.format(port=9002),
                                           merge_into=found[0]))  # fmt: skip
    assert result.status == "merged"


def _verify(brain: ops.Brain, tmp_path: Path) -> None:
    # an edit the index has not seen yet: verify re-indexes the file, and what it says
    write(tmp_path / "web" / "notes" / "web.md", NOTE.format(port=8002))
    ops.verify(brain, ops.VerifyInput(ref="web:notes/web.md"))


def _supersede(brain: ops.Brain, tmp_path: Path) -> None:
    ops.supersede(brain, ops.SupersedeInput(old="web:notes/web.md", new="web:README.md"))


def _collect(brain: ops.Brain, tmp_path: Path) -> None:
    write(tmp_path / "web" / "compose.yaml", "services:\n  web:\n    ports: ['8000:80']\n")
    ops.collect(brain, ops.CollectInput(libraries=["web"]))


def _git_import(brain: ops.Brain, tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "web"))
    commit(repo, {"README.md": "# web\n\nThe web notes about [[Postgres]].\n"}, ANN, T0, "init")
    ops.git_import(brain, ops.GitImportInput(libraries=["web"]))


def _library_add(brain: ops.Brain, tmp_path: Path) -> None:
    write(tmp_path / "new" / "a.md", "# A\n\nabout [[Postgres]]\n")
    ops.library_add(brain, ops.LibraryAddInput(name="new", path=str(tmp_path / "new")))


def _library_remove(brain: ops.Brain, tmp_path: Path) -> None:
    # ops shares Postgres with web: web's bridges must lose it
    assert "ops" in libmap.blocks(brain.store, ["web"])[0].bridged_libraries
    ops.library_remove(brain, ops.LibraryNameInput(name="ops"))
    assert "ops" not in libmap.blocks(brain.store, ["web"])[0].bridged_libraries


def _gc(brain: ops.Brain, tmp_path: Path) -> None:
    brain.cfg.libraries = [lib for lib in brain.cfg.libraries if lib.name != "ops"]
    brain.save_config()
    ops.gc(brain, ops.NoInput())
    assert "ops" not in libmap.blocks(brain.store, ["web"])[0].bridged_libraries


def _watch(brain: ops.Brain, tmp_path: Path) -> None:
    stop = threading.Event()
    runs: list[list[str]] = []

    def reindex(names: list[str]) -> None:
        ops.reindex(brain, ops.ReindexInput(libraries=names, embed=False))
        runs.append(names)

    thread = threading.Thread(target=watch, args=(brain.cfg, ["web"], reindex),
                              kwargs={"stop": stop, "debounce_ms": 100})  # fmt: skip
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not runs and time.monotonic() < deadline:
            time.sleep(0.05)
        write(tmp_path / "web" / "notes" / "web.md", NOTE.format(port=8003))
        while len(runs) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(runs) >= 2, "the watcher did not reindex the change"
    finally:
        stop.set()
        thread.join(timeout=30)


def _diary(brain: ops.Brain, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    lines = [{"type": "user", "timestamp": "2026-11-30T10:00:00Z",
              "message": {"role": "user", "content": "check http://localhost:7000 please"}}]  # fmt: skip
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    event = HookEvent("Stop", "s-derive", tmp_path / "web", transcript)
    assert hook(brain, event).diary is not None


WRITERS: dict[str, Callable[[ops.Brain, Path], None]] = {
    "reindex": _reindex, "save": _save, "ingest": _ingest, "merge": _merge, "verify": _verify,
    "supersede": _supersede, "collect": _collect, "git_import": _git_import, "library_add": _library_add,
    "library_remove": _library_remove, "gc": _gc, "watch": _watch, "diary": _diary,
}  # fmt: skip


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_leaves_facts_and_map_current(
    writer: str, home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    brain = _home(home, tmp_path, warm_cache)
    before = _derived_from(brain)
    WRITERS[writer](brain, tmp_path)
    _current(brain)
    if writer != "library_add":  # nothing is indexed yet: nothing derives from it
        assert _derived_from(brain) != before, f"{writer} changed nothing: the case tests nothing"
    brain.close()


def _derived_from(brain: ops.Brain) -> tuple[object, ...]:
    """What the map blocks and the pairings were computed from."""
    store = brain.store
    return (
        {b.library: b.state for b in store.maps.blocks()},
        {row.name: store.facts.pairing_digest(row.id) for row in store.entries.libraries()},
    )


def test_the_step_catches_up_what_an_interrupted_writer_left(
    home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    brain = _home(home, tmp_path, warm_cache)
    # a writer that died after indexing and before its step (as kill -9 would leave it)
    from brainmap.indexer import index_library

    write(tmp_path / "web" / "notes" / "web.md", NOTE.format(port=8123))
    index_library(brain.cfg, brain.store, brain.cfg.library("web"))
    web = brain.store.entries.library_ids(["web"])["web"]
    assert brain.store.facts.pairing_digest(web) != due_digest(brain.store, web)
    assert libmap.stale(brain.cfg, brain.store) == ["web"]
    done = derive.after_change(brain.cfg, brain.store, None, embed=False)  # any later writer
    assert done.facts_paired == ["web"]
    _current(brain)
    brain.close()


SINGLE_FILE = ["save", "ingest", "merge", "verify", "supersede", "diary"]


@pytest.mark.parametrize("writer", SINGLE_FILE)
def test_a_long_lived_process_settles_the_map_later_and_its_readers_see_it_at_once(
    writer: str, home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    brain = _home(home, tmp_path, warm_cache)
    brain.settle_map_later(delay_s=600)  # nothing settles by itself during the test
    WRITERS[writer](brain, tmp_path)
    assert brain.map_settler is not None
    written = brain.map_settler.pending()  # the diary writes to its own library
    assert written in (["web"], ["brain"])
    assert libmap.stale(brain.cfg, brain.store) == written  # what another process sees
    ops.map_(brain, ops.MapInput())  # a reader in the process: the map is refreshed first
    _current(brain)
    assert brain.map_settler.pending() == []
    brain.close()


def test_the_writes_of_a_while_share_one_refresh_of_the_map(
    home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    brain = _home(home, tmp_path, warm_cache)
    brain.settle_map_later(delay_s=600)
    assert brain.map_settler is not None
    for port in (9100, 9101, 9102):
        ops.save(brain, ops.SaveInput(title=f"Admin {port}", body=NOTE.format(port=port),
                                      library="web", force=True))  # fmt: skip
    assert libmap.stale(brain.cfg, brain.store) == ["web"]
    assert brain.map_settler.flush() == ["web"]  # one new block for the three saves
    assert libmap.blocks(brain.store, ["web"])[0].entries == 5
    _current(brain)
    assert brain.map_settler.flush() == []
    brain.close()


def test_the_map_settles_by_itself_and_when_the_process_ends(
    home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    brain = _home(home, tmp_path, warm_cache)
    brain.settle_map_later(delay_s=0.2)
    _save(brain, tmp_path)
    other = ops.Brain(home)  # another process's view
    deadline = time.monotonic() + 30
    while libmap.stale(other.cfg, other.store):
        assert time.monotonic() < deadline, "the map never settled"
        time.sleep(0.05)
    _current(brain)
    brain.settle_map_later(delay_s=600)
    _ingest(brain, tmp_path)
    assert libmap.stale(other.cfg, other.store) == ["web"]
    brain.close()  # what waits is refreshed before the process ends
    assert libmap.stale(other.cfg, other.store) == []
    other.close()


def test_a_server_settles_the_map_of_its_saves(brain: ops.Brain, home: Path) -> None:
    library = "example"
    brain.close()

    def entries(url: str) -> int:
        lines = httpx.get(f"{url}/map", timeout=60).json()["libraries"]
        return next(line["entries"] for line in lines if line["library"] == library)

    note = {"title": "rotating the cache certificate", "body": "restart it", "force": True,
            "library": library}  # fmt: skip
    with serving(home) as url:
        before = entries(url)
        assert httpx.post(f"{url}/save", json=note, timeout=60).json()["status"] == "saved"
        other = ops.Brain(home)
        assert libmap.stale(other.cfg, other.store) == [library]  # settling, MAP_SETTLE_S
        deadline = time.monotonic() + 30  # MAP_SETTLE_S, on a busy machine
        while libmap.stale(other.cfg, other.store):
            assert time.monotonic() < deadline, "the server never settled the map"
            time.sleep(0.1)
        other.close()
        note["title"] += " again"
        assert httpx.post(f"{url}/save", json=note, timeout=60).json()["status"] == "saved"
        assert entries(url) == before + 2  # its own readers see its saves at once


def test_a_long_lived_writer_holds_the_vector_cache_open(
    home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    """A save closes the cache's connections; the last to close would write its log back
    and delete it, holding the GIL: the held connection makes none of them the last."""
    brain = _home(home, tmp_path, warm_cache)
    log = brain.cfg.cache_path.with_name(brain.cfg.cache_path.name + "-wal")
    _save(brain, tmp_path)
    assert not log.exists()  # the save's own connection was the last: it checkpointed
    brain.hold_vector_cache()
    _ingest(brain, tmp_path)
    assert log.exists()  # not the last: left for the held one
    brain.close()
    assert not log.exists()  # which is, when the process ends
