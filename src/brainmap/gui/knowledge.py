"""The knowledge pages: ask a question, a library's facts, the stale audit with its
mark-verified form, and contradictions side by side.

Every assertion is shown with its confidence and evidence; a piece of evidence read from a
note links to that note's page at its line (``/ui/entry?ref=library:path#L12``). Config and
runtime sources are named, not shown: a compose file or a ``docker ps`` listing may hold
values (passwords, tokens) that the index never stores, so the GUI never serves them.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from brainmap import ops
from brainmap.gui.render import entry_url, url
from brainmap.gui.site import Form, Route, Site, redirect
from brainmap.keys import EntryRef, name_of

if TYPE_CHECKING:
    from brainmap.audit import AuditItem
    from brainmap.facts.models import Conflict, Evidence, Fact
    from brainmap.ops.facts import InfoSnippet

CONFIDENCES = ("confirmed", "partial", "hypothesis", "contradicted")
ROOTS = {"": "Facts and notes", "facts": "Facts only", "info": "Notes only"}
FACTS_LIMIT = 500  # rows of the facts table; filters narrow the rest
VERIFY_ACTION = "/ui/audit/verify"
# the stale audit's kinds, in the order the page lists them
STALE_KINDS = {
    "reverify": "Due for re-verification",
    "changed_on_disk": "Changed on disk since indexed",
    "deleted_on_disk": "Deleted on disk since indexed",
    "changed_in_git": "Changed in git since indexed",
    "code_changed": "Code files changed",
    "code_new": "New code files",
    "code_deleted": "Code files deleted",
}


def source_url(library: str, path: str, line: int | None = None) -> str:
    """A note's page at one line (``#L12``: the entry page gives each line an id)."""
    target = url("/ui/entry", ref=str(EntryRef(library, path)))
    return f"{target}#L{line}" if line else target


def graph_url(key: str) -> str:
    """The graph page centred on a node."""
    return url("/ui/graph", node=key)


@dataclass
class Source:
    """One piece of evidence as the pages show it."""

    where: str  # path:line, or what ran (docker ps on HOST)
    href: str | None  # the note at that line; None for config and runtime sources
    kind: str  # runtime | config | narrative
    method: str
    observed_at: str | None
    detail: str  # the host, URL or container the source named


def source(e: Evidence) -> Source:
    """Evidence with a link when it was read from a note (narrative comes from entries)."""
    where = f"{e.path}:{e.line}" if e.line else e.path
    href = source_url(e.library, e.path, e.line) if e.kind == "narrative" else None
    named = {"host": e.host, "url": e.url, "container": e.container, "process": e.process,
             "named": e.named}  # fmt: skip
    detail = ", ".join(f"{label} {value}" for label, value in named.items() if value)
    return Source(where, href, e.kind, e.method, e.observed_at, detail)


@dataclass
class FactView:
    """An assertion with its confidence, links to its nodes, and its evidence."""

    number: int  # as the written answer cites it: [1] is the first fact
    subject: str
    subject_href: str
    predicate: str
    object: str
    object_href: str
    confidence: str
    what: str
    library: str
    sources: list[Source]
    against: list[Source]
    resolved_by: str | None
    views: str | None  # where a fact of some compose files only holds


def fact_view(fact: Fact, number: int = 0) -> FactView:
    return FactView(
        number, name_of(fact.subject), graph_url(fact.subject), fact.predicate,
        name_of(fact.object), graph_url(fact.object), fact.confidence, fact.what, fact.library,
        [source(e) for e in fact.evidence], [source(e) for e in fact.against], fact.resolved_by,
        fact.views,
    )  # fmt: skip


# --- GET /ui/ask --------------------------------------------------------------------------------


@dataclass
class AskForm:
    """What the question form holds (as typed: the page shows it back)."""

    q: str = ""
    library: str = ""
    root: str = ""
    web: bool = True

    @classmethod
    def of(cls, request: Request) -> AskForm:
        params = request.query_params
        q = params.get("q", "").strip()
        root = params.get("root", "")
        # a checkbox is sent only when ticked: an asked question without it means no web
        return cls(q, params.get("library", "").strip(), root if root in ROOTS else "",
                   params.get("web") == "1" if q else True)  # fmt: skip

    def op_input(self) -> ops.AskInput:
        return ops.AskInput.model_validate({
            "question": self.q, "library": [self.library] if self.library else None,
            "root": self.root or None, "web": self.web,
        })  # fmt: skip


@dataclass
class Claim:
    """A claim of the reasoner's written answer and the evidence numbers it cites."""

    text: str
    sources: list[int]


@dataclass
class Note:
    """A note that may support the answer (never a confirmed fact)."""

    number: int
    title: str
    where: str
    href: str
    snippet: str


def note(hit: InfoSnippet, number: int) -> Note:
    heading = hit.heading if hit.heading and hit.heading != hit.title else ""
    title = " / ".join(t for t in (hit.title, heading) if t) or hit.path
    where = f"{hit.library} · {hit.path}:{hit.line_start}"
    return Note(number, title, where, source_url(hit.library, hit.path, hit.line_start),
                hit.snippet)  # fmt: skip


@dataclass
class WebLink:
    title: str
    href: str | None  # only http(s) addresses become links
    snippet: str


def ask(site: Site, request: Request) -> Response:
    """The question form and, once asked, the answer: its confidence, each fact with its
    evidence linked to its source line, notes that may support it, the web's results."""
    form = AskForm.of(request)
    names = site.libraries
    context: dict[str, Any] = {"form": form, "names": names, "roots": ROOTS, "result": None,
                               "error": None}  # fmt: skip
    status = 200
    if form.library and form.library not in names:
        return site.error_page(404, f"There is no library named {form.library!r}.",
                               "Pick one from the list, or ask every library.")  # fmt: skip
    if form.q:
        try:
            result = site.op("ask", form.op_input())
        except ValidationError as exc:  # a question too long: say so on the form
            context["error"] = ops.describe_errors(exc.errors())
            status = 400
        else:
            facts = [fact_view(f, i) for i, f in enumerate(result.facts, 1)]
            first = len(facts) + 1
            context.update(
                result=result, facts=facts,
                notes=[note(h, i) for i, h in enumerate(result.info, first)],
                claims=[Claim(c.text, c.sources) for c in result.claims],
                web=[WebLink(w.title or w.url, _web_href(w.url), w.snippet)
                     for w in result.web.results],
            )  # fmt: skip
    title = f"{form.q} — ask" if form.q else "Ask"
    return site.render.page("ask.html", title=title, current="ask", status=status, **context)


def _web_href(address: str) -> str | None:
    """A web result's address when it is an http(s) one (a search engine's answer is not
    trusted to be: ``javascript:`` is no link)."""
    scheme = urllib.parse.urlsplit(address).scheme.lower()
    return address if scheme in ("http", "https") else None


# --- GET /ui/facts ------------------------------------------------------------------------------


def facts(site: Site, request: Request) -> Response:
    """A library's facts as a table, filtered by predicate and confidence."""
    params = request.query_params
    names = site.libraries
    library = params.get("library", "").strip()
    predicate = params.get("predicate", "").strip()
    confidence = params.get("confidence", "")
    confidence = confidence if confidence in CONFIDENCES else ""
    found = None
    if library:
        found = site.op("library_facts", ops.LibraryFactsInput.model_validate({
            "library": library, "predicate": [predicate] if predicate else None,
            "confidence": [confidence] if confidence else None, "limit": FACTS_LIMIT,
        }))  # fmt: skip
    title = f"Facts of {library}" if library else "Facts"
    return site.render.page(
        "facts.html", title=title, current="facts", names=names, library=library,
        predicate=predicate, confidence=confidence, confidences=CONFIDENCES, found=found,
        rows=[fact_view(f) for f in found.facts] if found else [],
    )  # fmt: skip


# --- GET /ui/audit, POST /ui/audit/verify -------------------------------------------------------


@dataclass
class StaleItem:
    """A finding of the stale audit, with the page of its entry when it has one."""

    library: str
    path: str
    detail: str
    refresh: str
    entry: str | None  # id: the item can be marked verified
    href: str | None


@dataclass
class StaleGroup:
    kind: str
    label: str
    items: list[StaleItem] = field(default_factory=list)


def stale_groups(items: list[AuditItem]) -> list[StaleGroup]:
    """The audit's items by kind, in the page's order (an unknown kind last, as named)."""
    groups = {kind: StaleGroup(kind, label) for kind, label in STALE_KINDS.items()}
    for item in items:
        group = groups.setdefault(item.kind, StaleGroup(item.kind, item.kind.replace("_", " ")))
        live = item.entry is not None and item.kind != "deleted_on_disk"
        group.items.append(StaleItem(
            item.library, item.path, item.detail, item.refresh,
            item.entry if item.kind == "reverify" else None,
            entry_url(item.entry) if live and item.entry else None,
        ))  # fmt: skip
    return [g for g in groups.values() if g.items]


def audit(site: Site, request: Request) -> Response:
    """The stale audit: what changed since it was indexed, and what is due for
    re-verification, each with its refresh command; due entries can be marked verified."""
    library = request.query_params.get("library", "").strip()
    report = site.op("audit", ops.AuditInput(kind="stale",
                                                  library=[library] if library else None))  # fmt: skip
    verified = request.query_params.get("verified", "")
    return site.render.page(
        "audit.html", title="Stale audit", current="audit", names=site.libraries,
        library=library, groups=stale_groups(report.items), total=len(report.items),
        action=VERIFY_ACTION, verified=entry_url(verified) if verified else None,
    )  # fmt: skip


def verify(site: Site, form: Form) -> Response:
    """POST /ui/audit/verify: mark an entry verified, back to the audit it was listed on."""
    result = site.op("verify", ops.VerifyInput(ref=form.get("ref", "")))
    back = {"library": form.get("library", ""), "verified": result.id or ""}
    return redirect(url("/ui/audit", **back))


# --- GET /ui/audit/contradictions ---------------------------------------------------------------


@dataclass
class Side:
    """One side of a conflict: the value it states, its confidence and evidence."""

    value: str
    what: str
    confidence: str
    sources: list[Source]
    won: bool


@dataclass
class ConflictView:
    library: str
    subject: str
    subject_href: str
    predicate: str
    slot: str
    resolved_by: str | None
    winner: str | None
    sides: list[Side]


def conflict_view(conflict: Conflict) -> ConflictView:
    resolved = conflict.resolved_by is not None
    sides = [
        Side(
            name_of(s.object),
            s.what,
            s.confidence,
            [source(e) for e in s.evidence],
            won=resolved and s.confidence != "contradicted",
        )
        for s in conflict.sides
    ]
    return ConflictView(conflict.library, name_of(conflict.subject), graph_url(conflict.subject),
                        conflict.predicate, conflict.slot, conflict.resolved_by, conflict.winner,
                        sides)  # fmt: skip


def contradictions(site: Site, request: Request) -> Response:
    """Facts on which sources disagree, each conflict's sides side by side."""
    library = request.query_params.get("library", "").strip()
    report = site.op("audit", ops.AuditInput(kind="contradict",
                                                  library=[library] if library else None))  # fmt: skip
    return site.render.page(
        "contradictions.html", title="Contradictions", current="audit", names=site.libraries,
        library=library, conflicts=[conflict_view(c) for c in report.conflicts],
    )  # fmt: skip


def routes(site: Site) -> list[Route]:
    """Ask, facts, the stale audit and its mark-verified form, contradictions."""

    async def verify_post(request: Request) -> Response:
        return await site.post(request, VERIFY_ACTION, lambda form: verify(site, form))

    return [
        ("/ui/ask", site.safely(lambda r: ask(site, r)), ["GET"]),
        ("/ui/facts", site.safely(lambda r: facts(site, r)), ["GET"]),
        ("/ui/audit", site.safely(lambda r: audit(site, r)), ["GET"]),
        ("/ui/audit/contradictions", site.safely(lambda r: contradictions(site, r)), ["GET"]),
        (VERIFY_ACTION, verify_post, ["POST"]),
        (VERIFY_ACTION, site.post_only, ["GET"]),
    ]
