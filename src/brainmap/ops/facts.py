"""Ops on the facts root: collect observations, ask a question (facts first, then info, then
maybe the web)."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field

from brainmap import derive, websearch, written
from brainmap.collectors import (
    OVERRIDE_LAYER,
    PUBLISHES,
    RANDOM_HOST_PORT,
    Observation,
    project_name,
    split_service,
)
from brainmap.config import GLOBAL_LIBRARY, Config, LibraryConfig
from brainmap.errors import UserError
from brainmap.facts.answer import Reply, reply
from brainmap.facts.models import AUTHORITY, CONFIRMED, Fact, fact_of
from brainmap.facts.pairing import records
from brainmap.facts.text import describe_key, label, views
from brainmap.indexer import FACTS_NOT_READ
from brainmap.indexer import reindex as run_reindex
from brainmap.ops.core import Brain, Caller, _Input, op
from brainmap.progress import ProgressFn
from brainmap.reasoner import Spent, attempt
from brainmap.safefile import read_regular

Source = Literal["compose", "ssh", "yaml", "runtime", "narrative"]
FILE_SOURCES = ("compose", "ssh", "yaml", "narrative")
MAX_FROM_BYTES = 50_000_000


class CollectInput(_Input):
    libraries: list[str] | None = Field(None, description="Library names; all when empty.")
    source: list[Source] | None = Field(
        None,
        description="What to collect: compose, ssh, yaml and narrative are read from the "
        "library's files (changed files only); runtime lists running containers (docker ps) and "
        "listening sockets. Default: the file sources.",
    )
    from_file: str | None = Field(
        None,
        description="Read this file instead: docker ps --format '{{json .}}' output for "
        "runtime, or a compose / ssh config / YAML file outside the library (the source is "
        "told from the content unless one is named); collected into the global library unless "
        "libraries are named. Over HTTP and MCP only files inside a library or a folder of "
        "[collect] allow_from in config.toml are read.",
    )
    embed: bool = Field(
        True, description="Compute the missing embeddings of the notes re-read (as reindex)."
    )


@dataclass
class LibraryFacts:
    library: str
    ran: list[str]  # what was collected
    observations: dict[str, int]  # by method, after collection
    assertions: dict[str, int]  # by confidence
    notes: list[str] = field(default_factory=list)


@dataclass
class CollectReport:
    libraries: list[LibraryFacts]
    notes: list[str] = field(default_factory=list)  # about the whole run


@op("collect", CollectInput, CollectReport, writes=True, methods=("POST",))
def collect(
    brain: Brain,
    inp: CollectInput,
    progress: ProgressFn | None = None,
    *,
    caller: Caller = "cli",
) -> CollectReport:
    """Collect observations (running containers and sockets, compose files, ssh config, YAML
    configs, what the docs say) and pair them into assertions with a confidence: confirmed when
    two kinds of source agree, partial, hypothesis, or contradicted."""
    if not brain.cfg.libraries:
        raise UserError("no libraries yet", hint="brainmap library add NAME PATH")
    from_text = _read_from(brain.cfg, inp.from_file, caller) if inp.from_file else None
    sources: list[str] = list(inp.source or ())
    if not sources:
        sources = [_sniff(from_text)] if from_text is not None else list(FILE_SOURCES)
    if from_text is not None and (len(sources) != 1 or sources == ["narrative"]):
        raise UserError(
            "--from reads one source: runtime, compose, ssh or yaml",
            hint="e.g. --source runtime --from ps.json",
        )
    names = inp.libraries
    if inp.from_file and not names:  # one outside file belongs in one library: the global one
        if not any(lib.name == GLOBAL_LIBRARY for lib in brain.cfg.libraries):
            raise UserError("--from needs a library to collect into", hint="name the library")
        names = [GLOBAL_LIBRARY]
    report = CollectReport([])
    include_roots = _served_roots(brain.cfg) if caller != "cli" else None
    names = [lib.name for lib in brain.cfg.select(names)]
    # the step pairs what was collected
    with derive.changing(brain.cfg, brain.store, names, embed=inp.embed):
        if inp.from_file is None and set(sources) & set(FILE_SOURCES):
            # the file sources are the libraries' files: re-read what changed as reindex does,
            # vectors included (else doctor finds the re-read notes without any)
            indexed = run_reindex(brain.cfg, brain.store, names, embed=inp.embed, progress=progress)
            report.notes += indexed.problems  # a library whose folder is gone, and the fix
            if indexed.embedding is not None and indexed.embedding.error:
                report.notes.append(f"vectors not made: {indexed.embedding.error} "
                                    "(`brainmap reindex` makes them)")  # fmt: skip
        for name in names:
            report.libraries.append(_collect_library(brain, brain.cfg.library(name), sources,
                                                     inp.from_file, from_text, progress,
                                                     include_roots))  # fmt: skip
    for out in report.libraries:  # counted once the step has paired them
        library_id = brain.store.entries.library_ids([out.library])[out.library]
        out.observations = brain.store.facts.observation_counts(library_id)
        out.assertions = brain.store.facts.counts(library_id)
    return report


def _read_from(cfg: Config, name: str, caller: Caller) -> str:
    path = _served_path(cfg, name) if caller != "cli" else Path(name).expanduser()
    try:
        if not path.is_file():
            raise UserError(f"no file {path}", status=404)
        data = read_regular(path, MAX_FROM_BYTES + 1)  # a FIFO put there meanwhile never blocks
        if len(data) > MAX_FROM_BYTES:
            raise UserError(f"{path} is larger than {MAX_FROM_BYTES // 1_000_000} MB")
        text = data.decode("utf-8", errors="replace")
        return text.replace("\r\n", "\n").replace("\r", "\n")  # lines as text mode reads them
    except (OSError, ValueError) as exc:  # ValueError: a name no file system can hold
        raise UserError(f"cannot read {path}: {exc}", status=404) from exc


def _served_path(cfg: Config, name: str) -> Path:
    """The file a network caller names, resolved, when it lies inside a library or an
    ``[collect] allow_from`` folder: the server's user can read far more than the brain
    serves (/etc/passwd, /proc/self/environ), and collected facts are served back by ask."""
    try:
        real = Path(name).expanduser().resolve()  # every symlink followed: none leads out
        if any(real.is_relative_to(root) for root in _served_roots(cfg)):
            return real
    except (OSError, RuntimeError, ValueError):  # a loop, an unknown ~user, a NUL in the name
        pass
    # one answer for every path outside, existing or not: the refusal tells nothing of the disk
    raise UserError(
        "from_file is read over HTTP and MCP only inside a library or an allow_from folder",
        hint="add the folder to [collect] allow_from in config.toml, or run "
        "`brainmap collect --from FILE` on that machine",
        status=403,
    )


def _served_roots(cfg: Config) -> list[Path]:
    """The folders a network caller may have ``collect`` read: the libraries and ``[collect]
    allow_from``; an ssh config read from them may Include files from them only."""
    out = []
    for root in [str(lib.path) for lib in cfg.libraries] + cfg.collect.allow_from:
        try:
            out.append(Path(root).expanduser().resolve())
        except (OSError, RuntimeError):  # an unknown ~user or a symlink loop allows nothing
            continue
    return out


def _sniff(text: str) -> str:
    """Which source a file given with --from and no --source is: docker ps JSON lines, a
    compose file, an ssh config, else a YAML config."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if first.startswith("{"):
        return "runtime"
    if re.search(r"^services:\s*$", text, re.MULTILINE):
        return "compose"
    if re.search(r"^\s*(Host|Match|Include)\s+\S", text, re.MULTILINE | re.IGNORECASE):
        return "ssh"
    return "yaml"


def _collect_library(
    brain: Brain,
    lib: LibraryConfig,
    sources: list[str],
    from_file: str | None,
    from_text: str | None,
    progress: ProgressFn | None,
    include_roots: list[Path] | None,
) -> LibraryFacts:
    # imported here: the collectors (sockets, subprocesses, YAML) are not needed to serve reads
    from brainmap.collectors import runtime as runtime_mod
    from brainmap.collectors.files import config_observations

    store = brain.store
    out = LibraryFacts(lib.name, [], {}, {})
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if from_file is None and set(sources) & set(FILE_SOURCES):  # re-read by collect()
        out.ran += [s for s in sources if s in FILE_SOURCES]
        out.notes += _unread_facts(brain, lib.name)
    library_id = store.entries.ensure_library(lib.name, str(lib.path), lib.scope)
    if from_file is not None and from_text is not None:
        path = Path(from_file).expanduser().absolute()
        source = sources[0]
        said: list[Observation]
        unit = f"file:{path}"  # replaced by the next collection from the same file
        if source == "runtime":
            said = runtime_mod.docker_ps(from_text)
        else:
            # an outside file's project is its folder's name (as docker compose names it)
            try:
                said = config_observations(source, path, path.name, from_text,
                                           project_name(path.parent.name),
                                           include_roots=include_roots)  # fmt: skip
            except Exception as exc:  # hostile (an alias bomb) or not this source: no facts
                said = []
                out.notes.append(f"{path}: {FACTS_NOT_READ}: {exc}")
        store.facts.put_unit_observations(library_id, unit, records(said, str(path), now, None))
        out.ran.append(f"{source} from {path}")
    elif "runtime" in sources:
        host = runtime_mod.hostname()
        try:
            lines = runtime_mod.docker_ps_lines()
            said = runtime_mod.docker_ps(lines)
            store.facts.put_unit_observations(library_id, "runtime:docker",
                                        records(said, f"docker ps on {host}", now, None))  # fmt: skip
            out.ran.append("docker ps")
        except UserError as exc:  # no docker here: the sockets still tell what listens
            # what an earlier docker ps saw can no longer be checked: it confirms nothing now
            store.facts.put_unit_observations(library_id, "runtime:docker", [])
            out.notes.append(f"docker: {exc.message}")
        said = runtime_mod.sockets()
        store.facts.put_unit_observations(library_id, "runtime:sockets",
                                    records(said, f"sockets on {host}", now, None))  # fmt: skip
        out.ran.append("sockets")
    return out


def _unread_facts(brain: Brain, library: str) -> list[str]:
    """The library's files whose facts could not be read (doctor lists them too): without
    this, an alias bomb ahead of ``services:`` would look like a project with no services."""
    store = brain.store
    said = [(path, why) for name, path, why in store.entries.skipped() if name == library]
    warnings = store.entries.entry_warnings()
    said += [(path, w) for name, path, ws in warnings if name == library for w in ws]
    return [f"{path}: {why}" for path, why in said if why.startswith(FACTS_NOT_READ)]


# --- a library's facts --------------------------------------------------------------------

Confidence = Literal["confirmed", "partial", "hypothesis", "contradicted"]


class LibraryFactsInput(_Input):
    library: str = Field(description="A library name.")
    predicate: list[str] | None = Field(
        None, description="Only these predicates (publishes, image, depends_on, ...)."
    )
    confidence: list[Confidence] | None = Field(None, description="Only these confidences.")
    limit: int = Field(500, ge=1, le=5000, description="Most facts to return.")


@dataclass
class FactList:
    """A library's assertions that pass the filters, by subject, predicate and object."""

    library: str
    facts: list[Fact]
    total: int  # how many pass the filters (``facts`` holds at most ``limit`` of them)
    predicates: dict[str, int]  # every predicate of the library's facts, with its count
    confidence: dict[str, int]  # the library's facts by confidence


@op("library_facts", LibraryFactsInput, FactList)
def library_facts(brain: Brain, inp: LibraryFactsInput) -> FactList:
    """Every assertion of one library with its confidence and evidence, optionally only some
    predicates or confidences, and the counts by predicate and confidence of all of them."""
    brain.cfg.library(inp.library)  # unknown names are a clear 404
    ids = list(brain.store.entries.library_ids([inp.library]).values())
    rows = brain.store.facts.assertions(ids) if ids else []  # not indexed yet: no facts
    predicates: dict[str, int] = {}
    confidence: dict[str, int] = {}
    for row in rows:
        predicates[row.predicate] = predicates.get(row.predicate, 0) + 1
        confidence[row.confidence] = confidence.get(row.confidence, 0) + 1
    kept = [
        row
        for row in rows
        if (not inp.predicate or row.predicate in inp.predicate)
        and (not inp.confidence or row.confidence in inp.confidence)
    ]
    return FactList(inp.library, [fact_of(r) for r in kept[: inp.limit]], len(kept),
                    dict(sorted(predicates.items())), confidence)  # fmt: skip


# --- ask ----------------------------------------------------------------------------------


class AskInput(_Input):
    question: str = Field(min_length=1, max_length=2000, description="A question in words.")
    root: Literal["facts", "info"] | None = Field(
        None, description="facts: assertions only; info: narrative only; both when empty."
    )
    web: bool = Field(True, description="Ask the configured web search when no fact answers.")
    library: list[str] | None = Field(None, description="Only these libraries.")
    limit: int = Field(5, ge=1, le=50, description="Most facts and most info snippets.")


@dataclass
class InfoSnippet:
    """Narrative that may support an answer: never a confirmed fact."""

    library: str
    path: str
    line_start: int
    line_end: int
    title: str
    heading: str
    snippet: str
    score: float
    confirmed: bool = False


@dataclass
class WrittenClaim:
    """One claim of the written answer and the evidence it cites."""

    text: str
    sources: list[int]  # evidence numbers: 1 is the first fact, the info snippets follow


@dataclass
class AskResult:
    question: str
    answer: str | None  # the answer in a few words, when sources settle it (see _summary)
    facts: list[Fact]
    info: list[InfoSnippet]
    web: websearch.WebResult
    confirmed: bool = False  # two kinds of source state every value of the answer
    # the reasoner's short answer ([reasoner] answer): claims citing the evidence, "... [1][3]",
    # where [n] is the n-th of facts followed by info; never more authoritative than `answer`
    written: str | None = None
    claims: list[WrittenClaim] = field(default_factory=list)
    reasoner: Spent | None = None  # what the written answer cost, or why it was skipped
    more_facts: int = 0  # facts that answer too, beyond ``limit``


@op("ask", AskInput, AskResult, methods=("GET", "POST"))
def ask(brain: Brain, inp: AskInput) -> AskResult:
    """Answer a question from the facts first: assertions with their confidence (confirmed
    only when two independent sources agree) and evidence (path and line of each source);
    then notes that may support it, marked not confirmed; then, when no fact answers, a web
    search as a possible second source (its status says when it was throttled or down).
    With a reasoner ([reasoner] answer), also a short written answer: claims that each cite
    that evidence by number; the answer above stays the authoritative one."""
    facts: list[Fact] = []
    summary, confirmed, more = None, False, 0
    if inp.root in (None, "facts"):
        ids = None
        if inp.library:
            from brainmap.search import read_library_ids

            ids = list(read_library_ids(brain.cfg, brain.store, inp.library).values())
        said = reply(inp.question, brain.store.facts.assertions(ids))
        facts = [fact_of(r) for r in said.facts[: inp.limit]]
        more = len(said.facts) - len(facts)
        summary, confirmed = _summary(said)
    info: list[InfoSnippet] = []
    if inp.root in (None, "info"):
        found = brain.searcher.search(inp.question, libraries=inp.library, limit=inp.limit)
        info = [
            InfoSnippet(
                h.library,
                h.path,
                h.line_start,
                h.line_end,
                h.title,
                h.heading,
                h.snippet,
                round(h.score, 6),
            )
            for h in found.hits
        ]
    web = _web(brain, inp, answered=summary is not None)
    result = AskResult(inp.question, summary, facts, info, web, confirmed, more_facts=more)
    evidence = _evidence_lines(facts, info)
    if evidence:  # nothing to cite: nothing to write, no call
        claims, result.reasoner = attempt(
            brain.cfg, "answer", lambda r: written.write(r, inp.question, evidence)
        )
        result.claims = [WrittenClaim(c.text, list(c.sources)) for c in claims or ()]
        result.written = written.render(claims or ())
        if claims is not None and not claims and result.reasoner is not None:
            result.reasoner.skipped.append("answer: no claim cited the evidence given")
    return result


def _evidence_lines(facts: list[Fact], info: list[InfoSnippet]) -> dict[int, str]:
    """The evidence of a written answer, numbered as ``AskResult.written`` cites it."""
    lines: dict[int, str] = {}
    for fact in facts:
        where = ", ".join(f"{e.path}:{e.line}" if e.line else e.path for e in fact.evidence[:3])
        lines[len(lines) + 1] = f"fact, {fact.confidence}: {fact.what} (sources: {where})"
    for hit in info:
        title = " / ".join(t for t in (hit.title, hit.heading) if t)
        lines[len(lines) + 1] = (f"note, not confirmed, {hit.path}:{hit.line_start} {title}: "
                                 f"{hit.snippet}")  # fmt: skip
    return lines


def _summary(said: Reply) -> tuple[str | None, bool]:
    """The answer in a few words, and whether it is confirmed.

    It states the asked subjects' values (the winning side of a conflict, never the loser's
    nor a sibling service's), then in brackets what is not confirmed and what disagrees:
    ``8080 (vuejs/README.md:20 says 80; overruled by authority: config over narrative)``, and
    what compose files the question's view does not read say (``blog/compose.prod.yaml,
    applied with -f, says 80, 443``). A service its compose file declares without ports
    "publishes no port" (unless it extends a service of a file that cannot be read: then it
    is not known); one declared only in such files, what they say. A service the
    question names that the project it names does not have: that, and the services it has.
    None when one kind of source alone says it and nothing settled a conflict: an honest
    "unconfirmed".
    """
    if said.missing:
        return "; ".join(
            f"project {project} has no service called {name} (its services: {', '.join(has)})"
            for project, name, has in said.missing
        ), False
    lead = [fact_of(r) for r in said.lead]
    against = [fact_of(r) for r in said.against]
    aside = _aside_notes([fact_of(r) for r in said.aside], {f.subject for f in lead} | said.asked)
    if not lead:
        if not (said.silent or said.unknown):
            return ("; ".join(aside), False) if aside else (None, False)
        text = "; ".join(
            [f"{describe_key(s)} publishes no port"
             + (f" ({said.reached[s]})" if s in said.reached else "") for s in said.silent]
            + [f"{describe_key(s)}: not known ({why})" for s, why in said.unknown]
        )  # fmt: skip
        notes = [_disagreement(f, said.asked) for f in against] + aside
        return text + (f" ({'; '.join(dict.fromkeys(notes))})" if notes else ""), False
    if not said.unknown and not any(f.confidence == CONFIRMED or f.resolved_by for f in lead):
        return None, False
    inside = said.inside
    values = _ordered({_value(f, inside) for f in lead})
    sure = {_value(f, inside) for f in lead if f.confidence == CONFIRMED}
    # confirmed, or won a conflict
    settled = sure | {_value(f, inside) for f in lead if f.resolved_by}
    # what an extends docker compose would merge in and was not read may add to the answer
    notes = [f"{describe_key(s)}: {why}; what that adds is not known"
             for s, why in said.unknown]  # fmt: skip
    host = _ordered({label(f.object) for f in lead if f.predicate == PUBLISHES and f.container})
    if inside and host:
        notes.insert(0, "in the container; published on the host as " + ", ".join(host))
    # a service docker compose up does not start: what it takes to start it (whose, when
    # several answer: of which project, when several)
    answering = {f.subject for f in lead}
    several = len({_project_label(s) for s in answering}) > 1
    for subject, named in sorted({(f.subject, tuple(f.profiles)) for f in lead if f.profiles}):
        service = split_service(subject)[1]
        who = "" if len(answering) == 1 else describe_key(subject) if several else service
        notes.append(f"{who} only {views([], named)}".lstrip())
    by_project: dict[str, set[str]] = defaultdict(set)  # whose is which, when several answer
    for f in lead:
        by_project[_project_label(f.subject)].add(_value(f, inside))
    if len(by_project) > 1:
        notes[:0] = [f"of {p}: {', '.join(_ordered(v))}" for p, v in sorted(by_project.items())]
    if len(settled) < len(values):
        notes.append("not confirmed: " + ", ".join(v for v in values if v not in settled))
    subjects = {f.subject for f in lead} | said.asked
    notes += [_disagreement(f, subjects) for f in against] + aside
    text = ", ".join(values) + (f" ({'; '.join(dict.fromkeys(notes))})" if notes else "")
    return text, len(sure) == len(values)


def _project_label(subject: str) -> str:
    """The project a service's or a project's fact is about (the subject itself otherwise)."""
    if subject.startswith("service:"):
        return split_service(subject)[0]
    return subject.removeprefix("project:")


def _value(fact: Fact, inside: bool = False) -> str:
    """The value a fact gives the answer: a port on the host, or (``inside``) the
    container's port that it publishes."""
    if inside and fact.predicate == PUBLISHES and fact.container:
        return fact.container
    if inside:
        return label(fact.object)
    if fact.published == RANDOM_HOST_PORT:
        return f"{label(fact.object)} on a random host port"
    return label(fact.object)


def _ordered(values: set[str]) -> list[str]:
    """Ports in numeric order (80 before 443), other values alphabetically after them."""
    return sorted(values, key=lambda v: (not v.isdigit(), int(v) if v.isdigit() else 0, v))


def _aside_notes(facts: list[Fact], subjects: set[str]) -> list[str]:
    """What compose files outside a question's view say, one note a file:
    ``blog/compose.prod.yaml, applied with -f, says 80, 443``; about another subject than
    those asked, its claim (``says grafana of blog publishes port 3000``)."""
    from brainmap.collectors.compose import layer_of

    said: dict[tuple[str, str], list[str]] = defaultdict(list)
    for fact in facts:
        declared = [e for e in fact.evidence if e.method == "compose"] or fact.evidence
        path = declared[0].path if declared else ""
        layer = layer_of(path.rpartition("/")[2])
        how = ("not read with -f" if layer == OVERRIDE_LAYER
               else "not in COMPOSE_FILE" if layer is None else "applied with -f")  # fmt: skip
        said[(path, how)].append(_value(fact) if fact.subject in subjects else fact.what)
    return [f"{path}, {how}, says {', '.join(_ordered(set(values)))}"
            for (path, how), values in said.items()]  # fmt: skip


def _disagreement(loser: Fact, subjects: set[str]) -> str:
    """``vuejs/README.md:20 says 80; overruled by authority: config over narrative``."""
    first = loser.evidence[0] if loser.evidence else None
    where = f"{first.path}:{first.line}" if first and first.line else (first.path if first else "")
    # about an asked subject: the value says it; about another (the project of an asked
    # service, a sibling), the claim, so that it is not read as the asked one's
    said = _value(loser) if loser.subject in subjects else loser.what
    text = f"{where} says {said}"
    if loser.resolved_by == "authority" and loser.against:
        mine = max((e.kind for e in loser.against), key=AUTHORITY.__getitem__)
        theirs = max((e.kind for e in loser.evidence), key=AUTHORITY.__getitem__)
        text += f"; overruled by authority: {mine} over {theirs}"
    elif loser.resolved_by:
        text += f"; overruled by {loser.resolved_by}"
    return text


def _web(brain: Brain, inp: AskInput, *, answered: bool) -> websearch.WebResult:
    if answered:
        return websearch.WebResult("skipped", detail="the facts answer the question")
    if not inp.web:
        return websearch.WebResult("skipped", detail="web search turned off (--no-web)")
    if inp.root == "info":
        return websearch.WebResult("skipped", detail="only the info root was asked")
    if not brain.cfg.web.url:
        return websearch.WebResult("disabled", detail="no [web] url in config.toml")
    return websearch.search(brain.cfg.web.url, inp.question, timeout_s=brain.cfg.web.timeout_s,
                            limit=inp.limit)  # fmt: skip
