"""Writing knowledge: save a typed entry or ingest a raw leaf as a markdown file, then index it.

The file is written first (atomically, inside its library, never over another file), then
indexed at once. Before writing, a semantic dedup looks for a very similar entry: when one
exists nothing is written unless the caller forces it or merges into that entry.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from brainmap.config import Config, LibraryConfig
from brainmap.embedding import embed_text
from brainmap.errors import UserError
from brainmap.indexer import entry_id, index_files
from brainmap.markdown import clean_label, parse
from brainmap.reasoner import Spent, attempt
from brainmap.safefile import (
    UnsafePathError,
    atomic_write,
    created,
    library_lock,
    read_beneath,
    safe_folder,
    slugify,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from brainmap.reasoner import Reasoner
    from brainmap.search import Searcher

__all__ = ["Notes", "SaveResult", "library_lock", "safe_folder", "slugify"]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # all but tab and newlines
TAG_NEIGHBOUR = 0.845  # entries this close vote for the tags of an untagged note
TAG_NEAREST = 0.87  # the nearest entry lends all its tags when it is this close
REWRITE_HINT = (
    "the entry's file must be a regular file in a real folder of its library (not a FIFO, "
    "device, symlink or folder): put the note back, or run `brainmap reindex` to forget it"
)
# what to do next is the interface's to say: save and ingest differ, and the CLI names flags
# where HTTP and MCP name fields
DUPLICATE = "a very similar entry exists; nothing was written"
# the types the reasoner may give an untyped save, with those its library uses ("diary" is the
# diary's own: never suggested)
STANDARD_TYPES = ("note", "gotcha", "pattern", "bug", "decision", "guide")
_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
# the one tag the reasoner may add to the vocabulary: a word, or two joined by "-"
NEW_TAG = r"^[a-z][a-z0-9]{1,15}(-[a-z0-9]{2,15})?$"
VOCABULARY = 60  # the library's most used tags offered to the reasoner
MAX_TAGS = 5
TITLE_CHARS = 80


@dataclass
class Candidate:
    """An existing entry that looks like the one being saved."""

    id: str
    library: str
    path: str
    title: str
    similarity: float | None
    reason: str


@dataclass
class SaveResult:
    """What a save, ingest or verify did: saved, merged, verified, duplicate (nothing
    written, see candidates) or hint (ingest called without text; see message)."""

    status: Literal["saved", "duplicate", "merged", "verified", "hint"]
    library: str
    title: str
    id: str | None = None
    path: str | None = None
    file: str | None = None
    tags: list[str] = field(default_factory=list)
    tags_suggested: bool = False
    candidates: list[Candidate] = field(default_factory=list)
    message: str = ""
    reasoner: Spent | None = None  # what the reasoner was asked (None: not configured or off)


@dataclass
class Labels:
    """What the reasoner suggested for a save, checked against the library's vocabulary."""

    type: str | None = None
    tags: list[str] = field(default_factory=list)
    title: str | None = None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _clean(text: str) -> str:
    """Newlines normalised, control characters (which would make the file 'binary') dropped."""
    return _CONTROL.sub("", text.replace("\r\n", "\n")).strip("\n")


def render(meta: dict[str, Any], title: str, body: str) -> str:
    """Frontmatter plus body; a heading with the title is added when the body has none."""
    body = _clean(body)
    if not body.lstrip().startswith("#"):
        body = f"# {title}\n\n{body}" if body else f"# {title}"
    import yaml  # lazily: the search path never writes

    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000).strip()
    return f"---\n{front}\n---\n{body}\n"


class Notes:
    """Save and ingest for one configuration, index and searcher. They write and index the
    file; the caller runs the after-change step (``brainmap.derive``)."""

    def __init__(self, cfg: Config, searcher: Searcher) -> None:
        self.cfg = cfg
        self.searcher = searcher
        self.store = searcher.store

    def library(self, name: str | None) -> LibraryConfig:
        lib = self.cfg.library(name or self.cfg.save.library)
        if not lib.path.is_dir():
            raise UserError(f"library {lib.name!r}: {lib.path} is not a folder", status=409)
        return lib

    def save(
        self,
        *,
        title: str,
        body: str,
        type: str | None = None,
        tags: list[str] | None = None,
        library: str | None = None,
        project: str | None = None,
        folder: str | None = None,
        force: bool = False,
        merge_into: str | None = None,
        extra: dict[str, Any] | None = None,
        same_title_is_duplicate: bool = True,
        suggest_title: bool = False,
        supersedes: str | None = None,
    ) -> SaveResult:
        """Write a new entry (or merge into ``merge_into``) unless a near-duplicate exists.

        Without ``tags``, tags are suggested. With a reasoner (``[reasoner]`` url, ``tags`` on),
        one call, made before the library's lock is taken, picks them from the library's tag
        vocabulary (at most one new tag), and with them the type when ``type`` is None (not
        chosen) and a title when ``suggest_title`` says ``title`` was only derived from the
        text (an untitled ingest; the call is then made even with tags). Without a reasoner,
        or when it gives no usable answer (``result.reasoner.skipped`` says why), the tags
        come from the nearest entries, the type is ``note`` and the title stays.

        ``supersedes`` names an entry the new one replaces (it is then no duplicate): the
        new file says ``supersedes: [OLD]`` and OLD's gets ``superseded_by``, under both
        libraries' locks; when OLD cannot be written the new file is removed again."""
        title = clean_label(title)
        if not title:
            raise UserError("title: a title is needed (some visible text)", status=422)
        if merge_into:
            return self._merge(merge_into, title, body)
        lib = self.library(library)
        old_row = self._entry_row(supersedes) if supersedes else None
        old_lib = self.cfg.library(old_row["library"]) if old_row else None
        # cleaned as titles are: a tag kept in the file is offered to other notes later
        labels = (clean_label(t).lstrip("#").strip().lower() for t in tags or [])
        clean_tags = list(dict.fromkeys(t for t in labels if t))
        chosen_type = (type or "").strip().lower()
        # the note's first unit as the index will embed it: the vector found here is the one
        # indexing needs (one embedding per save, not two); embedded before the lock (in a
        # server, by its passage worker at the lowest CPU priority: queryvectors)
        vector = self.searcher.embedder.passage(self._first_passage(title, body), remember=True)
        asked, spent = None, None
        reasoner = self.cfg.reasoner
        if reasoner.enabled and reasoner.tags and (not clean_tags or suggest_title):
            neighbours = self.searcher.nearest(vector) if vector is not None else []
            # a save that would be refused as a duplicate is not worth a call
            if force or not self._duplicates(lib, title, neighbours, same_title_is_duplicate):
                asked, spent = self._labels(
                    lib, title, body, neighbours, want_type=not chosen_type,
                    want_tags=not clean_tags, want_title=suggest_title,
                )  # fmt: skip
            if asked is not None and asked.title and asked.title != title:
                title = asked.title
                vector = self.searcher.embedder.passage(
                    self._first_passage(title, body), remember=True
                )
        with self._locks(lib.name, *([old_lib.name] if old_lib else [])):
            neighbours = self.searcher.nearest(vector) if vector is not None else []
            candidates = self._duplicates(lib, title, neighbours, same_title_is_duplicate)
            if old_row is not None:  # the entry it replaces is not a duplicate of it
                candidates = [c for c in candidates if c.id != old_row["id"]]
            if candidates and not force:
                return SaveResult(
                    "duplicate", lib.name, title, candidates=candidates,
                    message=DUPLICATE, reasoner=spent,
                )  # fmt: skip
            suggested = not clean_tags
            if suggested:
                clean_tags = asked.tags if asked is not None and asked.tags else []
                clean_tags = clean_tags or _suggest_tags(neighbours)
            if not chosen_type:
                chosen_type = asked.type if asked is not None and asked.type else "note"
            meta: dict[str, Any] = {"title": title, "type": chosen_type}
            if clean_tags:
                meta["tags"] = clean_tags
            project = clean_label(project or "")
            if project:
                meta["project"] = project
            meta["created"] = _now().date()
            if old_row is not None and old_lib is not None:
                meta["supersedes"] = [supersession_ref(old_lib.name, old_row["path"], lib.name)]
            meta |= extra or {}
            # a failure inside removes the file again, through the folder it was made in
            with ExitStack() as made:
                path = self._create(
                    made, lib, safe_folder(folder) / slugify(title), render(meta, title, body)
                )
                rel = path.relative_to(lib.path).as_posix()
                undo_old: Callable[[], None] | None = None
                try:
                    if old_row is not None and old_lib is not None:
                        undo_old = self._mark_superseded(old_lib, old_row["path"], lib, rel)
                    (entry,) = index_files(self.cfg, self.store, lib, [rel]).ids
                    if old_row is not None and old_lib is not None:
                        index_files(self.cfg, self.store, old_lib, [old_row["path"]])
                except BaseException:
                    # never leave a file the index does not know, nor an entry without its file
                    self.store.entries.delete([entry_id(lib.name, rel)])
                    if undo_old is not None and old_row is not None and old_lib is not None:
                        undo_old()  # OLD as it was, in the file and the index
                        index_files(self.cfg, self.store, old_lib, [old_row["path"]])
                    raise
        return SaveResult(
            "saved", lib.name, title, entry, rel, str(path), clean_tags,
            suggested and bool(clean_tags), candidates, "saved and indexed", spent,
        )  # fmt: skip

    def _labels(
        self,
        lib: LibraryConfig,
        title: str,
        body: str,
        neighbours: list[tuple[Any, float]],
        *,
        want_type: bool,
        want_tags: bool,
        want_title: bool,
    ) -> tuple[Labels | None, Spent | None]:
        """One reasoner call for what a save leaves open: the type, tags in the library's
        vocabulary (at most one new), a title. ``(None, spent)`` when it gave nothing usable."""
        types, used = self.store.entries.vocabulary(lib.name)
        offered_types = list(dict.fromkeys(
            [*STANDARD_TYPES, *(t for t in types if _TYPE_NAME.match(t) and t != "diary")]
        ))[:20]  # fmt: skip
        vocabulary = [t for t in used if 0 < len(t) <= 40 and clean_label(t) == t][:VOCABULARY]
        near_tags = list(dict.fromkeys(t for row, _ in neighbours[:5] for t in row.tags))[:10]

        def ask(r: Reasoner) -> Labels:
            return suggest_labels(
                r, title, body, types=offered_types if want_type else None,
                vocabulary=vocabulary if want_tags else None, near_tags=near_tags,
                want_title=want_title,
            )  # fmt: skip

        out, spent = attempt(self.cfg, "tags", ask)
        if out is not None and want_tags and not out.tags and spent is not None:
            spent.skipped.append(
                "tags: none of the reasoner's tags fit; similar entries' tags used"
            )
        return out, spent

    def _first_passage(self, title: str, body: str) -> str:
        """What the index will embed for the first unit of a note saved with this title and
        body (the frontmatter is not embedded, so it does not matter here)."""
        parsed = parse(
            render({"title": title}, title, body),
            fallback_title=title,
            chunk_tokens=self.cfg.index.chunk_tokens,
            turn_tokens=self.cfg.index.turn_tokens,
        )
        first = parsed.chunks[0] if parsed.chunks else None
        heading, text = (first.heading, first.text) if first else ("", "")
        return embed_text(parsed.title, parsed.aliases, heading, text)

    def _create(self, made: ExitStack, lib: LibraryConfig, base: Path, text: str) -> Path:
        """Create the entry's file under its first free name; it is removed again when
        ``made`` unwinds with an exception."""
        names = (
            lib.path / base.with_name(f"{base.name}{'' if n == 1 else f'-{n}'}.md")
            for n in range(1, 1000)
        )
        try:
            return made.enter_context(created(lib.path, names, text.encode("utf-8")))
        except UnsafePathError as exc:
            raise UserError(
                f"refused to write outside library {lib.name!r}: {exc}", hint=exc.hint, status=403
            ) from exc
        except FileExistsError as exc:
            raise UserError(f"999 entries already use the name {base.name!r}", status=409) from exc

    def _duplicates(
        self,
        lib: LibraryConfig,
        title: str,
        neighbours: list[tuple[Any, float]],
        same_title_is_duplicate: bool,
    ) -> list[Candidate]:
        """Entries of the target library that the new one would duplicate."""
        threshold = self.cfg.save.dedup_threshold
        out: dict[str, Candidate] = {}
        for row, similarity in neighbours:
            if row.library == lib.name and similarity >= threshold and row.entry_id not in out:
                out[row.entry_id] = Candidate(
                    row.entry_id, row.library, row.path, row.title, round(similarity, 4),
                    "similar text",
                )  # fmt: skip
        if same_title_is_duplicate:
            for found, path, other in self.store.entries.titled(title, lib.name):
                out.setdefault(found, Candidate(found, lib.name, path, other, None, "same title"))
        return list(out.values())

    def _merge(self, target: str, title: str, body: str) -> SaveResult:
        """Append a dated section to an entry; on any failure the file keeps its old bytes."""

        def append(text: str) -> str:
            newline = "\r\n" if "\r\n" in text else "\n"
            lines = [f"## {title} ({_now().date().isoformat()})", "", *_clean(body).split("\n")]
            return text.rstrip("\r\n") + newline * 2 + newline.join(lines) + newline

        row, lib, path = self._rewrite(target, append, "merge into")
        return SaveResult(
            "merged", lib.name, row["title"], target, row["path"], str(path), row["tags"],
            message=f"appended a dated section to {row['path']}",
        )  # fmt: skip

    def verify(self, target: str, day: dt.date) -> SaveResult:
        """Set ``last_verified`` in an entry's frontmatter (the rest of the file is kept)."""
        row, lib, path = self._rewrite(
            target, lambda text: set_frontmatter_value(text, "last_verified", day.isoformat()),
            "verify",
        )  # fmt: skip
        return SaveResult(
            "verified", lib.name, row["title"], target, row["path"], str(path), row["tags"],
            message=f"last_verified: {day.isoformat()} in {row['path']}",
        )  # fmt: skip

    def supersede(self, old: str, new: str) -> SupersedeResult:
        """Mark entry ``old`` as replaced by ``new`` (ids, ``library:path`` or paths): NEW's
        frontmatter gets ``supersedes: [OLD]`` and OLD's ``superseded_by: NEW``, both under
        their libraries' locks. When OLD's file cannot be written, NEW's gets its old bytes
        back; when indexing fails, both do. The caller runs the after-change step."""
        old_row, new_row = self._entry_row(old), self._entry_row(new)
        if old_row["id"] == new_row["id"]:
            raise UserError("an entry cannot supersede itself", status=422)
        old_lib = self.cfg.library(old_row["library"])
        new_lib = self.cfg.library(new_row["library"])
        with self._locks(old_lib.name, new_lib.name):
            new_bytes = self._read_entry(new_lib, new_row["path"], "supersede")
            text = new_bytes.decode("utf-8", "replace")
            listed = parse(text, fallback_title="").supersedes
            ref = supersession_ref(old_lib.name, old_row["path"], new_lib.name)
            if ref not in listed:
                text = set_frontmatter_list(text, "supersedes", [*listed, ref])
            undo_new = self._write_entry(new_lib, new_row["path"], text.encode("utf-8"))
            try:
                undo_old = self._mark_superseded(old_lib, old_row["path"], new_lib, new_row["path"])
            except BaseException:
                undo_new()  # OLD could not be written: NEW as it was
                raise
            try:
                index_files(self.cfg, self.store, new_lib, [new_row["path"]])
                index_files(self.cfg, self.store, old_lib, [old_row["path"]])
            except BaseException:
                undo_old()
                undo_new()
                index_files(self.cfg, self.store, new_lib, [new_row["path"]])
                index_files(self.cfg, self.store, old_lib, [old_row["path"]])
                raise
        return SupersedeResult(
            "superseded", old_row["id"], new_row["id"], old_lib.name, old_row["path"],
            new_lib.name, new_row["path"],
            f"{old_lib.name}:{old_row['path']} is superseded by {new_lib.name}:{new_row['path']}",
        )  # fmt: skip

    def _entry_row(self, ref: str) -> dict[str, Any]:
        found = self.store.entries.find_entry(ref)
        row = self.store.entries.entry(found[0]) if found else None
        if row is None:
            raise UserError(f"no entry {ref!r}", hint="give an id, LIB:PATH or a path", status=404)
        return row

    def _locks(self, *libraries: str) -> ExitStack:
        """The locks of these libraries, each once, always in the same order (no deadlock
        between two writers that take the same two)."""
        stack = ExitStack()
        for name in sorted(set(libraries)):
            stack.enter_context(library_lock(self.cfg.home, name))
        return stack

    def _read_entry(self, lib: LibraryConfig, rel: str, what: str) -> bytes:
        limit = int(self.cfg.index.max_file_mb * 1024 * 1024)
        try:
            data = read_beneath(lib.path, rel, limit + 1)
        except UnsafePathError as exc:
            raise UserError(
                f"refused to read outside library {lib.name!r}: {exc}", hint=exc.hint, status=403
            ) from exc
        except OSError as exc:
            raise UserError(
                f"cannot {what} {lib.path / rel}: {exc.strerror or exc}", hint=REWRITE_HINT,
                status=409,
            ) from exc  # fmt: skip
        if len(data) > limit:
            raise UserError(f"cannot {what} {lib.path / rel}: larger than max_file_mb", status=413)
        return data

    def _write_entry(self, lib: LibraryConfig, rel: str, data: bytes) -> Callable[[], None]:
        """Write an entry's file atomically; return what puts its old bytes back."""
        old = self._read_entry(lib, rel, "rewrite")
        try:
            atomic_write(lib.path, lib.path / rel, data)
        except UnsafePathError as exc:
            raise UserError(
                f"refused to write outside library {lib.name!r}: {exc}", hint=exc.hint, status=403
            ) from exc
        except OSError as exc:
            raise UserError(
                f"cannot write {lib.path / rel}: {exc.strerror or exc}", hint=REWRITE_HINT,
                status=409,
            ) from exc  # fmt: skip

        def undo() -> None:
            atomic_write(lib.path, lib.path / rel, old)  # writes nothing when unchanged

        return undo

    def _mark_superseded(
        self, old_lib: LibraryConfig, old_rel: str, new_lib: LibraryConfig, new_rel: str
    ) -> Callable[[], None]:
        """Write ``superseded_by: NEW`` into OLD's frontmatter; return the undo."""
        text = self._read_entry(old_lib, old_rel, "supersede").decode("utf-8", "replace")
        ref = supersession_ref(new_lib.name, new_rel, old_lib.name)
        return self._write_entry(
            old_lib, old_rel, set_frontmatter_list(text, "superseded_by", ref).encode("utf-8")
        )

    def _rewrite(
        self, target: str, change: Callable[[str], str], what: str
    ) -> tuple[dict[str, Any], LibraryConfig, Path]:
        """Rewrite an entry's file through ``change`` and index it; on any failure the file
        keeps its old bytes (and the index its old rows)."""
        row = self.store.entries.entry(target)
        if row is None:
            raise UserError(f"no entry {target!r} to {what}", status=404)
        lib = self.cfg.library(row["library"])
        path = lib.path / row["path"]
        limit = int(self.cfg.index.max_file_mb * 1024 * 1024)
        with library_lock(self.cfg.home, lib.name):
            try:
                # a regular file only, reached without a symlink, and bounded: a FIFO where
                # the entry was would block the read forever and hold the library's lock
                old = read_beneath(lib.path, row["path"], limit + 1)
                if len(old) > limit:
                    raise UserError(f"cannot {what} {path}: larger than max_file_mb", status=413)
                new = change(old.decode("utf-8")).encode("utf-8")
            except UnsafePathError as exc:
                raise UserError(
                    f"refused to read outside library {lib.name!r}: {exc}", hint=exc.hint,
                    status=403,
                ) from exc  # fmt: skip
            except (OSError, UnicodeDecodeError) as exc:
                raise UserError(
                    f"cannot {what} {path}: {getattr(exc, 'strerror', None) or exc}",
                    hint=REWRITE_HINT, status=409,
                ) from exc  # fmt: skip
            if new == old:
                return row, lib, path  # never rewrite a file whose bytes would not change
            try:
                atomic_write(lib.path, path, new)
            except UnsafePathError as exc:
                raise UserError(
                    f"refused to write outside library {lib.name!r}: {exc}", hint=exc.hint,
                    status=403,
                ) from exc  # fmt: skip
            except OSError as exc:  # swapped for a FIFO (or worse) since it was read
                raise UserError(
                    f"cannot {what} {path}: {exc.strerror or exc}", hint=REWRITE_HINT, status=409
                ) from exc
            try:
                index_files(self.cfg, self.store, lib, [row["path"]])
            except BaseException:
                atomic_write(lib.path, path, old)
                index_files(self.cfg, self.store, lib, [row["path"]])
                raise
        return row, lib, path


@dataclass
class SupersedeResult:
    """What a supersede did: OLD (``old``: its id) is now superseded by NEW (``new``)."""

    status: Literal["superseded"]
    old: str
    new: str
    old_library: str
    old_path: str
    new_library: str
    new_path: str
    message: str = ""


def supersession_ref(library: str, rel: str, seen_from: str) -> str:
    """How an entry's frontmatter names another for supersession: its slug, qualified by
    its library when that is not the naming entry's own."""
    from brainmap.store import slug_of

    slug = slug_of(rel)
    return slug if library == seen_from else f"{library}:{slug}"


def set_frontmatter_list(text: str, key: str, value: str | list[str]) -> str:
    """Set a top-level key of the frontmatter to a string or a flow list of strings (JSON
    quoted, which YAML reads as is), dropping the block lines of its old value."""
    import json

    bom = "\ufeff" if text.startswith("\ufeff") else ""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.removeprefix(bom).split(newline)
    rendered = json.dumps(value, ensure_ascii=False)
    if lines and lines[0].rstrip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), 0)
        if end:
            start = next(
                (j for j in range(1, end) if re.match(rf"{re.escape(key)}\s*:", lines[j])), 0
            )
            if start:  # its old value's block lines (`- x`, indented) go with it
                stop = start + 1
                while stop < end and lines[stop][:1] in (" ", "\t", "-"):
                    stop += 1
                lines[start:stop] = [f"{key}: {rendered}"]
            else:
                lines.insert(end, f"{key}: {rendered}")
            return bom + newline.join(lines)
    return set_frontmatter_value(text, key, rendered)


def set_frontmatter_value(text: str, key: str, value: str) -> str:
    """Set a top-level scalar in the YAML frontmatter, touching no other line (a file
    without frontmatter gets one)."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text.removeprefix(bom)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(newline)
    setting = f"{key}: {value}"
    if lines and lines[0].rstrip() == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() in ("---", "..."):
                for j in range(1, i):
                    if re.match(rf"{re.escape(key)}\s*:", lines[j]):
                        lines[j] = setting
                        break
                else:
                    lines.insert(i, setting)
                return bom + newline.join(lines)
    return bom + newline.join(["---", setting, "---", *lines])


def _suggest_tags(neighbours: list[tuple[Any, float]], most: int = 5) -> list[str]:
    """Tags of the nearest entry when it is close, plus tags shared by two or more near ones.

    With e5, entries on the same topic score about 0.85-0.90 against a new note and
    unrelated ones 0.82-0.84 (measured on the example library).
    """
    near: dict[str, tuple[float, list[str]]] = {}
    for row, similarity in neighbours:
        if similarity >= TAG_NEIGHBOUR and row.entry_id not in near:
            near[row.entry_id] = (similarity, row.tags)
    ranked = sorted(near.values(), key=lambda item: -item[0])
    votes = Counter(tag for _, tags in ranked for tag in tags)
    chosen = list(ranked[0][1]) if ranked and ranked[0][0] >= TAG_NEAREST else []
    chosen += [tag for tag, count in votes.most_common() if count >= 2 and tag not in chosen]
    return chosen[:most]


def suggest_labels(
    reasoner: Reasoner,
    title: str,
    body: str,
    *,
    types: list[str] | None,
    vocabulary: list[str] | None,
    near_tags: Sequence[str] = (),
    want_title: bool = False,
) -> Labels:
    """Ask the reasoner for a note's type (one of ``types``, when given), tags (from
    ``vocabulary``, at most one new, when given) and title (when wanted), and keep only what
    fits those rules. Save and the bake-off's tags task both ask through here."""
    schema = _labels_schema(types, vocabulary, want_title)
    asks = [
        *(["a type"] if types is not None else []),
        *([f"1 to {MAX_TAGS} tags"] if vocabulary is not None else []),
        *([f"a short title (at most {TITLE_CHARS} characters)"] if want_title else []),
    ]
    lines = [f"Give this note {' and '.join(asks)}."]
    if types is not None:
        lines.append(f"Types: {', '.join(types)}.")
    if vocabulary is not None:
        lines.append(
            f"Tags in use: {', '.join(vocabulary) or '(none yet)'}. Choose tags from this "
            "list; add one new tag (lowercase, one or two words joined by -) only when "
            "none fits."
        )
        if near_tags:
            lines.append(f"Similar notes are tagged: {', '.join(near_tags)}.")
    lines += ["", f"Title: {title}", "Text:", _clean(body)[:1500]]
    system = "You label notes in a knowledge library. Answer with the JSON object only."
    # no repair attempt: a save makes one model call at most
    data = reasoner.json(
        system, "\n".join(lines), schema, max_tokens=200, repair=False
    ).model_dump()
    out = Labels()
    if types is not None and data.get("type") in types:
        out.type = data["type"]
    known, new = set(vocabulary or ()), 0
    for raw in data.get("tags") or []:
        tag = clean_label(str(raw)).lstrip("#").strip().lower()
        if not tag or tag in out.tags:
            continue
        if tag not in known:
            if new or not re.match(NEW_TAG, tag) or tag in (types or STANDARD_TYPES):
                continue  # beyond the one new tag the vocabulary may gain, or a type
            new += 1
        out.tags.append(tag)
    out.tags = out.tags[:MAX_TAGS]
    out.title = clean_label(str(data.get("title") or ""))[:TITLE_CHARS].strip() or None
    return out


def _labels_schema(
    types: list[str] | None, vocabulary: list[str] | None, title: bool
) -> type[BaseModel]:
    """The JSON schema of a reasoner's labels: only the fields asked for, every one bounded
    (a small model rambles and is cut off at max_tokens)."""
    from typing import Annotated, Literal

    from pydantic import ConfigDict, Field, create_model

    fields: dict[str, Any] = {}
    if types is not None:
        fields["type"] = (Literal[tuple(types)], ...)
    if vocabulary is not None:
        new_tag: Any = Annotated[str, Field(pattern=NEW_TAG, max_length=32)]
        item: Any = new_tag
        if vocabulary:
            item = Literal[tuple(vocabulary)] | new_tag
        fields["tags"] = (list[item], Field(min_length=1, max_length=MAX_TAGS))
    if title:
        fields["title"] = (str, Field(min_length=1, max_length=TITLE_CHARS))
    model: type[BaseModel] = create_model(
        "NoteLabels", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model


INGEST_HINT = (
    "ingest stores a raw piece of text (a leaf) as a note in a library and indexes it. Give "
    "`text` (required), and optionally `uri` (where it came from), `observed_at` (when it was "
    "seen, ISO 8601), `title`, `tags`, `library`. Use save instead for a typed entry you wrote "
    "(gotcha, pattern, decision...)."
)


def ingest_title(text: str, uri: str | None) -> str:
    """A title for a raw leaf: its first line, else its source."""
    first = next((line.strip("# ").strip() for line in text.splitlines() if line.strip()), "")
    return (first[:120] or uri or "ingested note").strip()
