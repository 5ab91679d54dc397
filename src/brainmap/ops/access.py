"""Who may run which op on which libraries, when a team's user asks a served brain.

Every op of the table has a rule in :data:`RULES` (a test checks that none is missing); an
op with the rule ``None`` is for the CLI only, which runs as the person who owns the files.
A rule says which libraries a call touches and the role it needs on each (``team.Role``):

- a read that names no library is narrowed to the libraries the user may read; naming one
  they may not read is refused (403);
- a call on an entry (get, verify, feedback, ...) needs the role on the entry's library;
- stats, doctor and the usage report describe the whole brain: they need admin on ``*``.

Every call also runs in the user's *view* (``Database.seeing``): an entry, a slug, a
supersession link, a graph edge or a search candidate of a library they may not read does
not exist for it, so each op answers as it does for what is missing (the same 404, the same
empty list) and no answer differs by what lies out of sight. Listings of the configured
libraries (the libraries, the map) are cut to the user's.

Every write a user asks for (done, unchanged, refused or failed) is a line of the team's write
log (``brainmap user log``), one per library it touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from brainmap.errors import UserError
from brainmap.ops.brain import Brain
from brainmap.ops.core import Caller, Op
from brainmap.store.team import WriteRow
from brainmap.team import EVERY_LIBRARY, Principal, Role, Team, now

__all__ = [
    "PRINCIPAL",
    "RULES",
    "Requester",
    "Rule",
    "allowed",
    "holds",
    "offered",
    "requester",
    "run",
]

log = logging.getLogger("brainmap.access")

#: Where ``brainmap serve``'s guard leaves a request's user in the ASGI scope
PRINCIPAL = "brainmap.principal"

_VERB = {Role.READ: "read", Role.WRITE: "write to", Role.ADMIN: "administer"}
_MAX_DETAIL = 500


@dataclass(frozen=True)
class Requester:
    """Who sends a request to a team's server, through which interface, and the team that
    logs their writes."""

    principal: Principal
    team: Team
    interface: str  # http, mcp or gui


def requester(scope: Mapping[str, Any], team: Team | None, interface: str) -> Requester | None:
    """The team's user an HTTP request (its ASGI scope) comes from, as the rules take them;
    None when the server has no team: then no rule applies. A team's server refuses a
    request that carries no user (it would otherwise run as the owner of the files)."""
    if team is None:
        return None
    principal = scope.get(PRINCIPAL)
    if not isinstance(principal, Principal):
        raise UserError("this request carries no user of the team", status=401)
    return Requester(principal, team, interface)


#: What a rule does with a call: the input to run (narrowed) and the libraries it touches
#: (none: it named none, and the user's role covers every library)
Check = Callable[[Brain, Principal, BaseModel], tuple[BaseModel, list[str]]]


@dataclass(frozen=True)
class Rule:
    """The role an op needs, how to find the libraries a call touches, and what of its
    output the user may see."""

    role: Role
    check: Check
    cut: Callable[[Principal, Any], Any] | None = None  # the output, cut to what they may see
    whole: bool = False  # it describes the whole brain: the role is needed on '*'


class Refused(UserError):
    """A call the user's roles do not allow (403), and the library it was refused on."""

    def __init__(self, message: str, hint: str, library: str = "") -> None:
        super().__init__(message, hint=hint, status=403)
        self.library = library


def refused(principal: Principal, role: Role, library: str) -> Refused:
    return Refused(
        f"{principal.user} may not {_VERB[role]} library {library!r}",
        f"an admin can grant it: brainmap user grant {principal.user} {role.label} {library}",
        library,
    )


def _universe(brain: Brain, index: bool) -> list[str]:
    """The libraries a call may name: this server's, and with ``index`` also every library
    of the index (on PostgreSQL, other machines' too)."""
    names = [lib.name for lib in brain.cfg.libraries]
    if index:
        names += [row.name for row in brain.store.entries.libraries()]
    return list(dict.fromkeys(names))


def narrow(role: Role, field: str, *, index: bool = False) -> Check:
    """A list of libraries in ``field``: every one named needs ``role``; none named becomes
    those the user holds ``role`` on (``index``: of the whole index, else this server's)."""

    def check(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
        named: list[str] | None = getattr(inp, field)
        if named:
            for library in named:
                if not who.may(role, library):
                    raise refused(who, role, library)
                _known(brain, who, library, index)
            return inp, list(named)
        if who.may_everywhere(role):
            return inp, []
        allowed = who.within(role, _universe(brain, index))
        if not allowed:
            raise Refused(
                f"{who.user} may {_VERB[role]} no library here",
                f"an admin can grant it: brainmap user grant {who.user} {role.label} LIBRARY",
            )
        return inp.model_copy(update={field: allowed}), allowed

    return check


def named(role: Role, field: str, default: Callable[[Brain], str] | None = None) -> Check:
    """One library in ``field``; when empty, ``default``'s (else every library: the role is
    then needed on all of them)."""

    def check(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
        library: str | None = getattr(inp, field)
        if library is None and default is not None:
            library = default(brain)
        if library is None:
            if who.may_everywhere(role):
                return inp, []
            for name in _universe(brain, index=False):
                if not who.may(role, name):
                    raise Refused(
                        f"{who.user} may not {_VERB[role]} every library",
                        f"name one of yours: {field}=LIBRARY",
                        name,
                    )
            return inp, []
        if not who.may(role, library):
            raise refused(who, role, library)
        _known(brain, who, library, index=False)
        return inp, [library]

    return check


def _known(brain: Brain, who: Principal, library: str, index: bool) -> None:
    """A library granted to a user but not (or no longer) there is unknown to them, in words
    that list no other library (the op's own error lists every library it knows)."""
    if who.may_everywhere(Role.READ) or library in _universe(brain, index):
        return
    raise UserError(f"no library named {library!r}", hint="brainmap library list", status=404)


def on_entries(role: Role, *fields: str) -> Check:
    """Entries named in ``fields``: the role is needed on each one's library. (An entry the
    user may not read does not resolve in their view: the op answers that it is missing.)"""

    def check(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
        from brainmap.ops.knowledge import locate_entry

        touched = []
        for field in fields:
            ref: str | None = getattr(inp, field)
            found = locate_entry(brain, ref) if ref else None
            if found is None:
                continue
            if not who.may(role, found[1]):
                raise refused(who, role, found[1])
            touched.append(found[1])
        return inp, list(dict.fromkeys(touched))

    return check


def everywhere(role: Role) -> Check:
    """What describes the whole brain: the role on every library (``*``)."""

    def check(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
        if not who.may_everywhere(role):
            raise Refused(
                f"{who.user} may not {_VERB[role]} every library, which this needs",
                f"an admin can grant it: brainmap user grant {who.user} {role.label}",
            )
        return inp, []

    return check


def fixed(role: Role, library: Callable[[Brain], str]) -> Check:
    """A call on one library the op itself decides (the diary's)."""

    def check(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
        name = library(brain)
        if not who.may(role, name):
            raise refused(who, role, name)
        return inp, [name]

    return check


def nothing_named(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
    """A call that names no library: its output is what the rule cuts (a listing), or what
    the user's view lets through."""
    return inp, []


def both(*checks: Check) -> Check:
    def check(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
        touched: list[str] = []
        for one in checks:
            inp, libraries = one(brain, who, inp)
            touched += libraries
        return inp, list(dict.fromkeys(touched))

    return check


def _save_library(brain: Brain) -> str:
    return brain.cfg.save.library


def _diary_library(brain: Brain) -> str:
    return brain.cfg.diary.library


def _save(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
    """A save writes into its library, or into the entry it merges into (its library is
    then ignored); the entry it supersedes is written too."""
    if getattr(inp, "merge_into", None):
        return on_entries(Role.WRITE, "merge_into")(brain, who, inp)
    return both(named(Role.WRITE, "library", _save_library),
                on_entries(Role.WRITE, "supersedes"))(brain, who, inp)  # fmt: skip


def _refs_file(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
    """A code file of a library the user may not read is in no library, to them."""
    from brainmap.ops.graph import RefsInput, library_path, not_in_a_library

    assert isinstance(inp, RefsInput)
    library, _ = library_path(brain, inp.file)
    if not who.may(Role.READ, library):
        raise not_in_a_library(inp.file)
    return inp, [library]


def _collect(brain: Brain, who: Principal, inp: BaseModel) -> tuple[BaseModel, list[str]]:
    """Collecting a file named by path reads it on the server, wherever it lies in the
    libraries (and what an ssh config includes): only an admin of every library may."""
    if getattr(inp, "from_file", None):
        return everywhere(Role.ADMIN)(brain, who, inp)
    return narrow(Role.ADMIN, "libraries")(brain, who, inp)


# --- what a listing of the configured libraries shows -----------------------------------------


def _cut_libraries(who: Principal, result: Any) -> Any:
    result.libraries = [lib for lib in result.libraries if who.may(Role.READ, lib.name)]
    return result


def _cut_blocks(who: Principal, result: Any) -> Any:
    result.libraries = [name for name in result.libraries if who.may(Role.READ, name)]
    result.blocks = [b for b in result.blocks if who.may(Role.READ, b.library)]
    return result


def _cut_reports(*fields: str) -> Callable[[Principal, Any], Any]:
    """An administration's report: what the after-change step did to other libraries (their
    map blocks, their diary rollups: everybody's derived data) is not the user's to see."""

    def cut(who: Principal, result: Any) -> Any:
        for name in fields:
            listed: list[str] = getattr(result, name)
            setattr(result, name, [n for n in listed if who.may(Role.READ, n.split(":", 1)[0])])
        return result

    return cut


def _cut_terms(who: Principal, result: Any) -> Any:
    """A search's terms are the query's words the whole index knows: to a user who reads
    only some libraries, only those their hits hold (what they could see anyway)."""
    if who.may_everywhere(Role.READ):
        return result
    from brainmap.analysis import fold

    texts = [fold(hit.text) for hit in result.hits]
    result.terms = [t for t in result.terms if any(t in text for text in texts)]
    return result


R, W, A = Role.READ, Role.WRITE, Role.ADMIN

#: Every op's rule; None: the CLI only (it runs as the owner of the files, not as a user)
RULES: dict[str, Rule | None] = {
    # reads
    "search": Rule(R, narrow(R, "library", index=True), _cut_terms),
    "ask": Rule(R, narrow(R, "library", index=True)),
    "neighbors": Rule(R, narrow(R, "library", index=True)),
    "audit": Rule(R, narrow(R, "library")),
    "map": Rule(R, narrow(R, "library")),
    "get": Rule(R, on_entries(R, "ref")),
    "hops": Rule(R, on_entries(R, "ref")),
    "feedback": Rule(R, on_entries(R, "ref")),
    "get_map": Rule(R, named(R, "library")),
    "library_facts": Rule(R, named(R, "library")),
    "diary_index": Rule(R, fixed(R, _diary_library)),
    "diary_text": Rule(R, fixed(R, _diary_library)),
    "refs": Rule(R, _refs_file),
    "backlinks": Rule(R, nothing_named),
    "library_list": Rule(R, nothing_named, _cut_libraries),
    "map_blocks": Rule(R, nothing_named, _cut_blocks),
    # writes
    "save": Rule(W, _save),
    "ingest": Rule(W, named(W, "library", _save_library)),
    "supersede": Rule(W, on_entries(W, "old", "new")),
    "verify": Rule(W, on_entries(W, "ref")),
    # administration
    "reindex": Rule(A, narrow(A, "libraries"), _cut_reports("map", "facts_paired", "rollups")),
    "collect": Rule(A, _collect),
    "git_import": Rule(A, narrow(A, "libraries")),
    "map_recompute": Rule(
        A, named(A, "library"), _cut_reports("recomputed", "unchanged", "not_indexed")
    ),
    "stats": Rule(A, everywhere(A), whole=True),
    "doctor": Rule(A, everywhere(A), whole=True),
    "usage_report": Rule(A, everywhere(A), whole=True),
    # the CLI's
    "library_add": None, "library_remove": None, "sync": None, "gc": None, "eval": None,
    "init": None, "prune": None, "hooks_install": None, "hooks_uninstall": None,
    "hooks_status": None, "diary_rollup": None, "diary_summarize": None,
    "reasoner_status": None, "reasoner_bakeoff": None,
    # the team's own administration
    "user_add": None, "user_list": None, "user_remove": None, "user_grant": None,
    "user_revoke": None, "token_create": None, "token_list": None, "token_revoke": None,
    "write_log": None,
}  # fmt: skip


def allowed(who: Requester | None, role: str, libraries: Sequence[str]) -> list[str]:
    """Those of ``libraries`` on which the user holds ``role`` (read, write or admin); all
    of them when no team's user asks."""
    if who is None:
        return list(libraries)
    return who.principal.within(Role.parse(role), libraries)


def holds(who: Requester | None, role: str, library: str | None = None) -> bool:
    """Whether the user holds ``role`` on ``library`` (None: on every library); always, when
    no team's user asks."""
    if who is None:
        return True
    wanted = Role.parse(role)
    if library is None:
        return who.principal.may_everywhere(wanted)
    return who.principal.may(wanted, library)


def offered(o: Op, principal: Principal) -> bool:
    """Whether the user could run ``o`` at all (MCP lists only those tools)."""
    rule = RULES.get(o.name)
    if rule is None:
        return False
    if rule.whole:
        return principal.may_everywhere(rule.role)
    return principal.may_somewhere(rule.role)


def run(o: Op, brain: Brain, inp: BaseModel, caller: Caller, who: Requester | None) -> Any:
    """Run ``o`` for an interface: as it is for the owner of the files (``who`` None), else
    as the team's user ``who`` may (narrowed, refused, filtered; writes logged)."""
    if who is None:
        return o.run(brain, inp, caller)
    rule = RULES.get(o.name)
    if rule is None:
        raise UserError(f"{o.tool} is for the command line only", status=403)
    principal = who.principal
    with brain.store.db.seeing(_view(principal, rule)):
        try:
            inp, touched = rule.check(brain, principal, inp)
        except UserError as exc:
            if o.writes:
                _log(who, o, [getattr(exc, "library", "")], "refused", exc.message)
            raise
        try:
            result = o.run(brain, inp, caller)
        except Exception as exc:
            if o.writes:
                detail = exc.message if isinstance(exc, UserError) else _kind(exc)
                _log(who, o, touched, "failed", detail)
            raise
        if rule.cut is not None:
            result = rule.cut(principal, result)
    if o.writes:
        _log(who, o, touched, _outcome(result), "", _target(result))
    return result


def _kind(exc: Exception) -> str:
    """What failed, for the log: a write that failed in the server's writer process by the
    kind it raised there."""
    from brainmap.writeworker import WriteFailed

    return exc.kind if isinstance(exc, WriteFailed) else type(exc).__name__


def _outcome(result: Any) -> str:
    """What came of a write that ran: done, or nothing written (a near-duplicate refused
    by the save itself, ingest's usage hint)."""
    return "unchanged" if getattr(result, "status", "") in ("duplicate", "hint") else "done"


def _view(principal: Principal, rule: Rule) -> list[str] | None:
    """The libraries a user's call sees. An administration (reindex, collect, ...) runs on
    whole libraries it names, which the rule has checked, and sees everything, as what
    derives from a change always does."""
    return None if rule.role is Role.ADMIN else reader_view(principal)


def reader_view(principal: Principal) -> list[str] | None:
    """The libraries a user's reads see: those they hold a role on (None: every one)."""
    if principal.may_everywhere(Role.READ):
        return None
    return [library for library in principal.roles if library != EVERY_LIBRARY]


def _target(result: Any) -> str:
    """What a write wrote, as the log shows it: an entry's library:path, when it names one."""
    path = getattr(result, "path", None)
    library = getattr(result, "library", None)
    if isinstance(path, str) and path and isinstance(library, str):
        return f"{library}:{path}"
    new_path = getattr(result, "new_path", None)
    if isinstance(new_path, str):
        return f"{result.old_library}:{result.old_path} -> {result.new_library}:{new_path}"
    return ""


def _log(
    who: Requester,
    o: Op,
    libraries: Sequence[str],
    outcome: str,
    detail: str,
    target: str = "",
) -> None:
    """One line a library of the write log. Best effort: a write that was done stays done,
    and the error that refused or failed one stays the answer, when the log cannot be
    written (a busy or unreachable team database); the server's log says so."""
    principal = who.principal
    at = now()
    rows = [
        WriteRow(None, at, principal.user, principal.token_id, who.interface, o.tool,
                 library, target, outcome, detail[:_MAX_DETAIL])
        for library in (libraries or [EVERY_LIBRARY if outcome == "done" else ""])
    ]  # fmt: skip
    try:
        who.team.log(rows)
    except Exception:
        log.exception("the write log missed %s of %s by %s", outcome, o.tool, principal.user)
