"""One served GUI: the open brain, its mode, its CSRF secret, its renderer; how every page
runs (errors as HTML pages) and how every form posts (CSRF and read-only checks)."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from contextvars import ContextVar
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from brainmap import ops
from brainmap.errors import UserError
from brainmap.gui.csrf import FIELD, Csrf
from brainmap.gui.render import Renderer

if TYPE_CHECKING:
    from pydantic import BaseModel

    from brainmap.gui.account import SignIn
    from brainmap.ops.access import Requester
    from brainmap.team import Team

log = logging.getLogger("brainmap.gui")
#: The team's user of the request a page or form is serving (None: the server has no team)
_requester: ContextVar[Requester | None] = ContextVar("brainmap_gui_requester", default=None)
#: Who is signed in for that request, as the header shows it (None: nobody needs to be)
_account: ContextVar[str | None] = ContextVar("brainmap_gui_account", default=None)

MAX_FORM_FIELDS = 20
FORM_TYPE = "application/x-www-form-urlencoded"

#: The main navigation: (href, label, key); a page passes its key as ``current``.
NAV: list[tuple[str, str, str]] = [
    ("/", "Library map", "home"),
    ("/ui/search", "Search", "search"),
    ("/ui/save", "Save", "save"),
    ("/ui/diary", "Diary", "diary"),
    ("/ui/usage", "Usage", "usage"),
    ("/ui/ask", "Ask", "ask"),
    ("/ui/facts", "Facts", "facts"),
    ("/ui/audit", "Audit", "audit"),
    ("/ui/graph", "Graph", "graph"),
]

Page = Callable[[Request], Response]
Form = dict[str, str]
#: What a page module's ``routes(site)`` lists: (path, endpoint, HTTP methods).
Route = tuple[str, Callable[[Request], Any], list[str]]


class Site:
    """The pages of one server: they read through ops; writes need the form's CSRF token."""

    def __init__(
        self,
        brain: ops.Brain,
        *,
        read_only: bool,
        team: Team | None = None,
        sign_in: SignIn | None = None,
    ) -> None:
        """``team``: the server's, whose users' roles apply; ``sign_in``: who a token
        belongs to, when the server takes tokens (the GUI then has a sign-in page)."""
        self.brain = brain
        self.read_only = read_only
        self.team = team
        self.sign_in = sign_in
        self.csrf = Csrf()
        self.render = Renderer(
            self.csrf, read_only=read_only, nav=NAV, account=self.account, may=self.may
        )

    @staticmethod
    def account() -> str | None:
        """Who is signed in, as the page header shows it (None: nobody is, or needs to be)."""
        return _account.get()

    def op(self, name: str, inp: BaseModel) -> Any:
        """Run op ``name`` as the user of the request being served (their roles apply)."""
        from brainmap.ops.access import run

        return run(ops.OPS[name], self.brain, inp, "http", _requester.get())

    @property
    def libraries(self) -> list[str]:
        """The configured library names the user may read, in config order."""
        return self.libraries_for("read")

    def libraries_for(self, role: str) -> list[str]:
        """The configured library names on which the user holds ``role`` (all of them
        without a team)."""
        from brainmap.ops.access import allowed

        return allowed(_requester.get(), role, [lib.name for lib in self.brain.cfg.libraries])

    @staticmethod
    def may(role: str, library: str | None = None) -> bool:
        """Whether the user holds ``role`` on ``library`` (None: on every library): the pages
        offer only the forms the user may send."""
        from brainmap.ops.access import holds

        return holds(_requester.get(), role, library)

    def serving(self, request: Request) -> tuple[Any, Any]:
        """Make ``request``'s user the one the ops run as (a request reaches a page only
        once the guard has let it in), until :meth:`served` is given what this returns."""
        from brainmap.ops.access import requester

        who = requester(request.scope, self.team, "gui")
        name = who.principal.user if who is not None else "owner" if self.sign_in else None
        return _requester.set(who), _account.set(name)

    @staticmethod
    def served(tokens: tuple[Any, Any]) -> None:
        _requester.reset(tokens[0])
        _account.reset(tokens[1])

    def error_page(self, status: int, message: str, hint: str | None = None) -> Response:
        """An HTML page for an error, with its status."""
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        return self.render.page(
            "error.html", title=phrase, status=status, message=message, hint=hint
        )

    def failure(self, exc: Exception) -> Response:
        """The error page for what a page or form raised: a user error or bad input says
        what was wrong; anything else is logged and shown as an internal error."""
        if isinstance(exc, UserError):
            return self.error_page(exc.status, exc.message, exc.hint)
        if isinstance(exc, ValidationError):
            return self.error_page(400, ops.describe_errors(exc.errors()))
        log.error("GUI request failed", exc_info=exc)
        return self.error_page(500, f"internal error: {type(exc).__name__}")

    def safely(self, fn: Page) -> Page:
        """The endpoint running page ``fn``: never a traceback, an HTML error page instead."""

        def endpoint(request: Request) -> Response:
            token = self.serving(request)
            try:
                return fn(request)
            except Exception as exc:
                return self.failure(exc)
            finally:
                self.served(token)

        return endpoint

    async def post(
        self, request: Request, action: str, run: Callable[[Form], Response]
    ) -> Response:
        """Run the write ``run`` for a form posted to ``action``: refused when read-only or
        without that action's CSRF token (a body that is not a form has none). ``run`` gets
        the form's fields and runs in a worker thread; it answers with a redirect
        (Post/Redirect/Get), or the form again with what was wrong."""
        try:
            if self.read_only:
                return self.error_page(403, "This server is read-only: nothing can be changed.",
                                       "start `brainmap serve` without --read-only")  # fmt: skip
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            try:  # anything but a form has no token
                form = parse_form(await request.body()) if kind == FORM_TYPE else {}
            except ValueError:
                return self.error_page(400, "The form could not be read.")
            if not self.csrf.valid(action, form.get(FIELD)):
                return self.error_page(
                    403, "The form's security token is missing or out of date.",
                    "Reload the page and submit the form again.",
                )  # fmt: skip
            token = self.serving(request)
            try:
                return await run_in_threadpool(run, form)
            finally:
                self.served(token)
        except Exception as exc:
            return self.failure(exc)

    def not_found(self, request: Request) -> Response:
        """Any other /ui path."""
        return self.error_page(404, f"There is no page at {request.url.path}.")

    def post_only(self, request: Request) -> Response:
        """A GET of a form's action: it only takes a POST (a GET never writes)."""
        response = self.error_page(405, f"{request.url.path} only takes a form (POST).")
        response.headers["Allow"] = "POST"
        return response


def redirect(target: str) -> Response:
    """The answer to a form that did its write: see the result with a GET."""
    return RedirectResponse(target, status_code=303)


def parse_form(body: bytes) -> Form:
    """An x-www-form-urlencoded body: the first value of each field (ValueError when it has
    too many fields)."""
    fields = urllib.parse.parse_qs(
        body.decode("latin-1"), keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS
    )
    return {key: values[0] for key, values in fields.items()}
