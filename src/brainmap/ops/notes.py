"""Ops that write knowledge: save and ingest (apart from search and get, so that a search
process never imports the writer, the indexer and the collectors)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from brainmap.notes import INGEST_HINT, SaveResult, SupersedeResult, ingest_title
from brainmap.ops.core import Brain, _Input, op

_TAG = Annotated[str, Field(min_length=1, max_length=64)]
MAX_BODY = 1_000_000


class SaveInput(_Input):
    title: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"[^\s\x00-\x1f\x7f-\x9f]",  # a visible character, not only controls
        description="Short, specific title.",
    )
    body: str = Field("", max_length=MAX_BODY, description="Markdown text of the entry.")
    type: str | None = Field(
        None,
        pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$",
        description="gotcha, pattern, bug, decision, guide, diary, note, ... Default: note, or "
        "the reasoner's choice when it suggests the tags.",
    )
    tags: list[_TAG] | None = Field(
        None,
        max_length=20,
        description="Suggested when omitted: by the reasoner from the library's tags when one "
        "is configured, else from similar entries.",
    )
    library: str | None = Field(None, description="Target library; default from config.")
    project: str | None = Field(None, max_length=100)
    folder: str | None = Field(None, max_length=200, description="Sub-folder in the library.")
    force: bool = Field(False, description="Write even when a near-duplicate exists.")
    merge_into: str | None = Field(
        None,
        description="Append title and body as a dated section of this entry id (the other "
        "fields are then ignored).",
    )
    supersedes: str | None = Field(
        None,
        max_length=2000,
        description="An entry (id or 'library:path') the new one replaces: it leaves default "
        "search and is no duplicate of the new one. Both files say so (supersedes / "
        "superseded_by).",
    )

    @field_validator("title", mode="before")
    @classmethod
    def _visible_title(cls, value: Any) -> Any:
        # "" and "   " are one mistake: one message (the length and pattern checks word them
        # apart), the words of the UserError that notes.save raises for a title it cleans away
        if isinstance(value, str) and not _VISIBLE.search(value):
            raise PydanticCustomError("title_blank", "a title is needed (some visible text)")
        return value


_VISIBLE = re.compile(r"[^\s\x00-\x1f\x7f-\x9f]")


@op("save", SaveInput, SaveResult, writes=True, methods=("POST",), handed=True)
def save(brain: Brain, inp: SaveInput) -> SaveResult:
    """Save a knowledge entry you want future sessions to find (a gotcha, decision, pattern,
    how-to): a markdown file with frontmatter in a library, indexed at once. When a very
    similar entry already exists nothing is written and the candidates come back: then
    pass merge_into=<candidate id> to append to it, or force=true to save anyway. Tags are
    suggested when you give none (and the type when you give neither): by the reasoner
    from the library's tags when one is configured, else from similar entries."""
    result = brain.notes.save(
        title=inp.title, body=inp.body, type=inp.type, tags=inp.tags, library=inp.library,
        project=inp.project, folder=inp.folder, force=inp.force, merge_into=inp.merge_into,
        supersedes=inp.supersedes,
    )  # fmt: skip
    if result.status == "duplicate":
        result.message += (
            ". Pass merge_into=<candidate id> to add this as a dated section of one of them, "
            "or force=true to save anyway."
        )
    return _derived(brain, result)


def _derived(brain: Brain, result: SaveResult) -> SaveResult:
    """Run the after-change step when something was written."""
    if result.status in ("saved", "merged", "verified"):
        brain.changed([result.library])
    return result


class IngestInput(_Input):
    text: str | None = Field(None, max_length=MAX_BODY, description="The raw text to keep.")
    uri: str | None = Field(None, max_length=2000, description="Where the text came from.")
    observed_at: dt.datetime | None = Field(None, description="When it was seen (ISO 8601).")
    title: str | None = Field(
        None,
        max_length=200,
        description="Default: written by the reasoner when one is configured, else the text's "
        "first line.",
    )
    tags: list[_TAG] | None = Field(None, max_length=20)
    library: str | None = Field(None, description="Target library; default from config.")
    force: bool = Field(False, description="Write even when a near-duplicate exists.")


@op("ingest", IngestInput, SaveResult, writes=True, methods=("POST",), handed=True)
def ingest(brain: Brain, inp: IngestInput) -> SaveResult:
    """Keep a raw piece of text (a web page excerpt, command output, a message) with its
    source uri and observation time as a note in the inbox/ folder of a library, indexed at
    once. Without a title or tags, a configured reasoner writes the title and picks tags from
    the library's (else: the first line, and similar entries' tags). Call it without text to
    get a short usage hint."""
    if not inp.text or not inp.text.strip():
        library = inp.library or brain.cfg.save.library
        return SaveResult("hint", library, "", message=INGEST_HINT)
    observed = inp.observed_at or dt.datetime.now(dt.UTC).replace(microsecond=0)
    extra: dict[str, Any] = {"observed_at": observed}
    if inp.uri:
        extra["source"] = inp.uri
    result = brain.notes.save(
        title=inp.title or ingest_title(inp.text, inp.uri), body=inp.text, type="note",
        tags=inp.tags, library=inp.library, folder="inbox", force=inp.force, extra=extra,
        same_title_is_duplicate=False,  # the title is only the text's first line
        suggest_title=not inp.title,
    )  # fmt: skip
    if result.status == "duplicate":  # ingest has no merge_into: save does
        result.message += ". Pass force=true to keep it anyway."
    return _derived(brain, result)


class SupersedeInput(_Input):
    old: str = Field(max_length=2000, description="The replaced entry: id or 'library:path'.")
    new: str = Field(max_length=2000, description="The entry that replaces it.")


@op("supersede", SupersedeInput, SupersedeResult, writes=True, methods=("POST",),
    handed=True)  # fmt: skip
def supersede(brain: Brain, inp: SupersedeInput) -> SupersedeResult:
    """Mark entry `old` as replaced by entry `new`: new's frontmatter gets `supersedes:
    [old]` and old's `superseded_by: new` (both written, or neither). The old entry then
    leaves default search, hooks and facts evidence; search with include_inactive=true still
    finds it, and get shows what replaced it."""
    result = brain.notes.supersede(inp.old, inp.new)
    libraries = list(dict.fromkeys([result.new_library, result.old_library]))
    brain.changed(libraries)
    return result
