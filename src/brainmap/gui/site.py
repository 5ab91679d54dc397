"""One served GUI: the open brain, its mode, its CSRF secret, its renderer; how every page
runs (errors as HTML pages) and how every form posts (CSRF and read-only checks)."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from brainmap import ops
from brainmap.errors import UserError
from brainmap.gui.csrf import FIELD, Csrf
from brainmap.gui.render import Renderer

log = logging.getLogger("brainmap.gui")

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

    def __init__(self, brain: ops.Brain, *, read_only: bool) -> None:
        self.brain = brain
        self.read_only = read_only
        self.csrf = Csrf()
        self.render = Renderer(self.csrf, read_only=read_only, nav=NAV)

    @property
    def libraries(self) -> list[str]:
        """The configured library names, in config order."""
        return [lib.name for lib in self.brain.cfg.libraries]

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
            try:
                return fn(request)
            except Exception as exc:
                return self.failure(exc)

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
            return await run_in_threadpool(run, form)
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
