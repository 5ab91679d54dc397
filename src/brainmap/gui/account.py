"""Signing in to the GUI of a server that takes tokens (``--token``, or a team's users').

A browser sends no ``Authorization`` header, so the sign-in page takes the token and sets a
cookie (HttpOnly, SameSite=Lax) that names which token signed in and until when, signed with
the server's secret: the token itself never leaves the form. The guard accepts the cookie on
the GUI's pages only, so REST and MCP still need the header, and nothing else that shares the
host name can replay the cookie as a token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from brainmap.gui.csrf import FIELD
from brainmap.gui.site import FORM_TYPE, Route, Site, parse_form, redirect

if TYPE_CHECKING:
    from brainmap.team import Principal

SESSION_COOKIE = "brainmap_session"
LOGIN = "/ui/login"
LOGOUT = "/ui/logout"
SESSION_SECONDS = 12 * 3600


class SignIn(Protocol):
    """What a server that takes tokens lends its GUI: who a token belongs to, and the cookie
    of a sign-in."""

    def principal(self, given: str) -> Principal | None: ...

    def session(self, principal: Principal) -> str: ...


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of this site, never another site."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def login_page(site: Site, target: str, error: str | None = None, status: int = 200) -> Response:
    return site.render.page(
        "login.html", title="Sign in", status=status, next=target, error=error,
        team=site.team is not None, signing_in=True,
    )  # fmt: skip


async def _form(request: Request) -> dict[str, str] | None:
    """The posted form, or None when the body is no form (or has too many fields)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != FORM_TYPE:
        return {}
    try:
        return parse_form(await request.body())
    except ValueError:
        return None


def routes(site: Site) -> list[Route]:
    """The sign-in page and its form, and signing out (none when the server takes no token)."""
    check = site.sign_in
    if check is None:
        return []

    def show(request: Request) -> Response:
        return login_page(site, safe_next(request.query_params.get("next")))

    async def sign_in(request: Request) -> Response:
        try:
            return await _sign_in(request)
        except Exception as exc:  # a busy or unreachable team database: an error page
            return site.failure(exc)

    async def _sign_in(request: Request) -> Response:
        form = await _form(request)
        if form is None:
            return site.error_page(400, "The form could not be read.")
        target = safe_next(form.get("next"))
        if not site.csrf.valid(LOGIN, form.get(FIELD)):
            return site.error_page(403, "The form's security token is missing or out of date.",
                                   "Reload the page and sign in again.")  # fmt: skip
        token = form.get("token", "").strip()
        principal = await run_in_threadpool(check.principal, token) if token else None
        if principal is None:
            return login_page(site, target, "That token is not valid (it may have been revoked "
                              "or have expired).", status=401)  # fmt: skip
        response = redirect(target)
        response.set_cookie(
            SESSION_COOKIE, check.session(principal), max_age=SESSION_SECONDS, path="/", httponly=True,
            samesite="lax", secure=request.url.scheme == "https",
        )  # fmt: skip
        return response

    async def sign_out(request: Request) -> Response:
        form = await _form(request)
        if form is None or not site.csrf.valid(LOGOUT, form.get(FIELD)):
            return site.error_page(403, "The form's security token is missing or out of date.",
                                   "Reload the page and sign out again.")  # fmt: skip
        response = redirect(LOGIN)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return [
        (LOGIN, show, ["GET"]),
        (LOGIN, sign_in, ["POST"]),
        (LOGOUT, sign_out, ["POST"]),
        (LOGOUT, site.post_only, ["GET"]),
    ]
