"""save and ingest: atomic markdown writes inside the library, dedup, merge, auto-tags.

RELIABILITY 2 (kill -9 during save), 7 (path traversal), 8 (symlink escape).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from brainmap import ops
from brainmap.errors import UserError
from brainmap.markdown import parse
from brainmap.notes import SaveResult, slugify
from brainmap.safefile import TEMP_PREFIX
from conftest import write


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _save(brain: ops.Brain, **kw: object) -> SaveResult:
    return ops.save(brain, ops.SaveInput(library="example", **kw))  # type: ignore[arg-type]


def test_save_writes_frontmatter_and_indexes_at_once(brain: ops.Brain, library: Path) -> None:
    result = _save(
        brain, title="Pin the Postgres image tag", type="decision", tags=["Docker", "#postgres"],
        project="web", body="Use `postgres:16.4`, never `latest`: a pull changed the major version.",
    )  # fmt: skip
    assert result.status == "saved" and result.path == "pin-the-postgres-image-tag.md"
    text = (library / result.path).read_text()
    entry = parse(text, fallback_title="x")
    assert (entry.title, entry.type, entry.tags, entry.project) == (
        "Pin the Postgres image tag", "decision", ["docker", "postgres"], "web",
    )  # fmt: skip
    assert entry.created == time.strftime("%Y-%m-%d", time.gmtime())
    assert text.split("---\n", 2)[2].startswith("# Pin the Postgres image tag\n")
    hits = brain.searcher.search("which postgres image tag", limit=3).hits
    assert hits[0].id == result.id and hits[0].vector_rank is not None  # text and vector at once
    assert brain.store.vectors.pending_count(brain.searcher.model) == 0


def test_a_save_embeds_its_note_once(
    brain: ops.Brain, library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dedup check's vector is the one the index needs: one embedding per save."""
    from brainmap.embedders import load_embedder

    embedder = load_embedder(brain.cfg.embedder)
    embedded: list[str] = []
    passages = embedder.passages

    def counted(texts: list[str]) -> object:
        embedded.extend(texts)
        return passages(texts)

    monkeypatch.setattr(embedder, "passages", counted)
    result = _save(brain, title="Rotate the backup keys", body="Every quarter, with `age`.")
    assert result.status == "saved" and len(embedded) == 1
    assert brain.store.vectors.pending_count(brain.searcher.model) == 0  # and it has its vector
    hits = brain.searcher.search("rotate backup keys", mode="vector", limit=1).hits
    assert hits[0].id == result.id


def test_near_duplicate_returns_the_candidate_and_writes_nothing(
    brain: ops.Brain, library: Path
) -> None:
    before = _files(library)
    body = (
        "Use git reset --soft HEAD~1 to drop the last commit but keep the changes staged. If it "
        "was pushed already, use git revert HEAD instead of rewriting history."
    )
    result = _save(brain, title="How to undo the last commit in git", body=body)
    assert result.status == "duplicate" and result.id is None and result.path is None
    assert [c.path for c in result.candidates] == ["patterns/git-undo-commit.md"]
    assert result.candidates[0].similarity and result.candidates[0].similarity >= 0.95
    assert _files(library) == before
    same_title = _save(brain, title="undo the LAST git commit", body="something else entirely")
    assert same_title.status == "duplicate" and same_title.candidates[0].reason == "same title"
    forced = _save(brain, title="How to undo the last commit in git", body=body, force=True)
    assert forced.status == "saved" and (library / str(forced.path)).exists()


def test_merge_into_appends_a_dated_section(brain: ops.Brain, library: Path) -> None:
    target = brain.store.entries.find_entry("example:patterns/git-undo-commit.md")
    assert target is not None
    before = (library / "patterns/git-undo-commit.md").read_text()
    result = _save(brain, title="Recover with reflog", body="`git reflog` finds the dropped commit.",
                   merge_into=target[0])  # fmt: skip
    assert result.status == "merged" and result.id == target[0]
    after = (library / "patterns/git-undo-commit.md").read_text()
    assert after.startswith(before.rstrip("\n"))
    assert f"## Recover with reflog ({time.strftime('%Y-%m-%d', time.gmtime())})" in after
    hits = brain.searcher.search("reflog dropped commit", mode="bm25").hits
    assert hits[0].id == target[0]
    with pytest.raises(UserError, match="no entry"):
        _save(brain, title="x", body="y", merge_into="0000000000000000")


def test_tags_are_suggested_from_nearest_entries(brain: ops.Brain) -> None:
    result = _save(
        brain, title="SQLite WAL checkpoint starvation",
        body="Long-lived readers keep WAL checkpoints from completing and the WAL grows.",
    )  # fmt: skip
    assert result.status == "saved" and result.tags_suggested
    assert "sqlite" in result.tags


def test_same_title_twice_gets_distinct_slugs(brain: ops.Brain) -> None:
    first = _save(brain, title="Release checklist", body="1. tag 2. build 3. publish", force=True)
    second = _save(brain, title="Release checklist", body="1. freeze 2. announce", force=True)
    assert (first.path, second.path) == ("release-checklist.md", "release-checklist-2.md")
    assert first.id != second.id


@pytest.mark.parametrize(
    ("title", "folder"),
    [
        ("../x", None), ("..\\x", None), ("a/../../x", None), ("/etc/passwd", None),
        ("C:\\x", None), ("%2e%2e/x", None), ("...", None), ("CON", None), ("nul\x00byte", None),
        ("ok", "../../sentinel"), ("ok", "/etc"), ("ok", "..\\..\\sentinel"), ("ok", "../library-evil"),
    ],
)  # fmt: skip
def test_path_traversal_never_leaves_the_library(
    brain: ops.Brain, library: Path, tmp_path: Path, title: str, folder: str | None
) -> None:
    """RELIABILITY 7: titles and folders are slugified; nothing outside the library changes."""
    sentinel = tmp_path / "sentinel"
    write(sentinel / "keep.md", "# keep\n")
    evil = tmp_path / "library-evil"  # a sibling whose name starts like the library's
    evil.mkdir()
    outside = {p: _files(p) for p in (sentinel, evil)}
    result = _save(brain, title=title, body="traversal attempt", folder=folder, force=True)
    assert result.status == "saved"
    written = Path(str(result.file)).resolve()
    assert written.is_relative_to(library.resolve())
    assert ".." not in Path(str(result.path)).parts
    assert {p: _files(p) for p in (sentinel, evil)} == outside
    assert not list(tmp_path.glob("x*")) and not (tmp_path / "etc").exists()


def test_slugs() -> None:
    assert slugify("  Hello, World!  ") == "hello-world"
    assert slugify("Crème brûlée") == "creme-brulee"
    assert slugify("生成 SSH 密钥") == "生成-ssh-密钥"
    assert slugify("CON") == "con-note" and slugify("...") == "note"
    assert len(slugify("x" * 500)) == 80


def test_symlinked_folder_is_never_written_through(
    brain: ops.Brain, library: Path, tmp_path: Path
) -> None:
    """RELIABILITY 8: a folder symlink inside the library that points outside is refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, library / "linked")
    with pytest.raises(UserError, match="outside") as info:
        _save(brain, title="through the link", body="should not land outside", folder="linked")
    assert info.value.status == 403
    assert list(outside.iterdir()) == []
    os.symlink(outside / "target.md", library / "via-file-link.md")  # a dangling file symlink
    result = _save(brain, title="via file link", body="x", force=True)
    assert result.path == "via-file-link-2.md" and not (outside / "target.md").exists()


def test_control_characters_are_dropped(brain: ops.Brain, library: Path) -> None:
    result = _save(
        brain, title="ctl\x01 title", body="text with \x15 control \x1c chars", force=True
    )
    assert result.status == "saved"
    assert "\x15" not in (library / str(result.path)).read_text()


def test_control_characters_in_tags_and_project_are_dropped(
    brain: ops.Brain, library: Path
) -> None:
    controls = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    result = _save(brain, title="Tagged with controls", body="kumquat grove notes",
                   tags=["\x00", "ok\x07tag", " Dock\x1bER ", "\x9d"], project="../p\x00")  # fmt: skip
    assert result.tags == ["oktag", "docker"]
    text = (library / str(result.path)).read_text()
    assert not controls.search(text) and "project: ../p\n" in text
    assert ops.get(brain, ops.GetInput(ref=str(result.id))).project == "../p"
    alone = _save(brain, title="Only controls", body="x", tags=["\x01"], project="\x00", force=True)
    alone_text = (library / str(alone.path)).read_text()
    assert "project:" not in alone_text and not controls.search(alone_text)
    ingested = ops.ingest(brain, ops.IngestInput(text="raw leaf", tags=["\x00", "a\x01b"],
                                                 library="example", force=True))  # fmt: skip
    assert ingested.tags == ["ab"]
    # files written by hand are cleaned when indexed, so no other note is ever offered them
    write(library / "hand.md", '---\ntags: ["\\0", "x\\ay"]\nproject: "\\0q"\n---\n# Hand\n')
    ops.reindex(brain, ops.ReindexInput(embed=False))
    hand = ops.get(brain, ops.GetInput(ref="example:hand.md"))
    assert hand.tags == ["xy"] and hand.project == "q"


def test_ingest(brain: ops.Brain, library: Path) -> None:
    hint = ops.ingest(brain, ops.IngestInput(library="example"))
    assert hint.status == "hint" and "text" in hint.message and not (library / "inbox").exists()
    result = ops.ingest(
        brain,
        ops.IngestInput(
            text="Changelog 4.2: the --legacy flag is removed.", uri="https://example.org/changelog",
            observed_at="2026-11-01T08:30:00Z", library="example",
        ),
    )  # fmt: skip
    assert result.status == "saved" and str(result.path).startswith("inbox/")
    entry = ops.get(brain, ops.GetInput(ref=str(result.id)))
    assert entry.meta["source"] == "https://example.org/changelog"
    assert entry.observed_at.startswith("2026-11-01T08:30:00")
    assert entry.title == "Changelog 4.2: the --legacy flag is removed."


_SAVE_LOOP = """
import sys
from brainmap import ops
brain = ops.Brain(sys.argv[1])
entry = sys.argv[2]
for i in range(10_000):
    ops.save(brain, ops.SaveInput(title=f"step {i}", body=f"body {i} " + "x" * (i % 50), merge_into=entry))
    print(i, flush=True)
"""


def test_long_non_ascii_titles_fit_file_name_limits(brain: ops.Brain, library: Path) -> None:
    title = "\U00020000" * 100 + " 記録"  # 4-byte letters: 400 bytes of title
    result = _save(brain, title=title[:200], body="long title", force=True)
    assert result.status == "saved" and len(Path(str(result.path)).name.encode()) <= 255


def test_merge_keeps_line_endings_mode_and_drops_control_characters(
    brain: ops.Brain, library: Path
) -> None:
    path = library / "crlf.md"
    path.write_bytes(b"# Windows note\r\n\r\nfirst line\r\n")
    path.chmod(0o640)
    ops.reindex(brain, ops.ReindexInput(embed=False))
    entry = brain.store.entries.find_entry("example:crlf.md")
    assert entry is not None
    result = _save(brain, title="More", body="second\x00 line\x1b", merge_into=entry[0])
    assert result.status == "merged"
    data = path.read_bytes()
    assert b"\r\n## More (" in data and b"\r\nsecond line\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")  # every line ending is still CRLF
    assert path.stat().st_mode & 0o777 == 0o640
    fresh = _save(brain, title="Fresh file mode", body="x", force=True)
    assert Path(str(fresh.file)).stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_abandoned_temp_files_are_swept(brain: ops.Brain, library: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    abandoned = library / f"{TEMP_PREFIX}{dead}-abc"
    live = library / f"{TEMP_PREFIX}{os.getpid()}-def"  # a writer still running: left alone
    abandoned.write_text("half a note")
    live.write_text("being written")
    report = ops.reindex(brain, ops.ReindexInput(embed=False)).libraries[-1]
    assert not abandoned.exists() and live.exists()
    assert report.added == 0 and report.skipped == 0  # temp files are never indexed


def test_kill_during_save_leaves_old_or_new_bytes(
    brain: ops.Brain, library: Path, home: Path
) -> None:
    """RELIABILITY 2: kill -9 while an entry is rewritten again and again: the file always
    holds one complete version; temp files are never indexed and are swept by the next scan."""
    target = brain.store.entries.find_entry("example:gotchas/cron-timezone.md")
    assert target is not None
    path = library / "gotchas" / "cron-timezone.md"
    original = path.read_text().rstrip("\n") + "\n"
    section = re.compile(r"\n## step (\d+) \(\d{4}-\d{2}-\d{2}\)\n\nbody \1 ?x*\n")
    brain.close()
    for delay in (0.8, 1.3, 1.9, 2.6):
        proc = subprocess.Popen([sys.executable, "-c", _SAVE_LOOP, str(home), target[0]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        text = path.read_text()
        assert text.startswith(original)
        rest = text[len(original) :]
        # the file is the original plus whole sections only: never empty, never cut short
        assert section.sub("", rest) == "", rest[-200:]
    assert section.search(path.read_text()), "no save completed: the kills tested nothing"
    reopened = ops.Brain(home)
    report = ops.reindex(reopened, ops.ReindexInput(embed=False)).libraries[-1]
    assert report.skipped == 0 and report.added == 0  # a temp file left by a kill is not indexed
    assert not list(library.rglob(f"{TEMP_PREFIX}*"))  # and it is swept: its writer is dead
    reopened.close()
