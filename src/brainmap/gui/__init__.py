"""The web GUI: the library map as home page, search, entries with their provenance,
writing and the diary, usage, and the knowledge pages (ask, facts, audit, graph).

Server-rendered HTML from Jinja2 templates (``templates/``, every value autoescaped) with one
inline stylesheet: no JavaScript, no build step, no external asset. The Content Security
Policy allows no script at all and only the page's own stylesheet, so even a value that
escaped escaping could not run. Pages read only through ops. Forms that write are offered
only when the server is not read-only, and each POST must carry its form's CSRF token
besides passing the Guard's Origin and ``Sec-Fetch-Site`` checks. Every GUI error is an HTML
page with its status; no GUI route is in the OpenAPI document.

Each page module has ``routes(site) -> [(path, endpoint, methods)]``; :func:`install` adds
them all to the app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from brainmap import ops
from brainmap.gui import account, graphview, knowledge, pages, writing
from brainmap.gui.site import Site

if TYPE_CHECKING:
    from brainmap.gui.account import SignIn
    from brainmap.team import Team

MODULES = (pages, writing, knowledge, graphview, account)


def install(
    app: Starlette,
    brain: ops.Brain,
    *,
    read_only: bool,
    team: Team | None = None,
    sign_in: SignIn | None = None,
) -> Site:
    """Mount the GUI's routes on ``app`` (none of them in the OpenAPI document). With
    ``sign_in`` (the server takes tokens), a sign-in page; with ``team``, its users' roles
    decide what each sees and may change."""
    site = Site(brain, read_only=read_only, team=team, sign_in=sign_in)
    routes = [route for module in MODULES for route in module.routes(site)]
    routes.append(("/favicon.ico", _no_icon, ["GET"]))
    routes.append(("/ui/{rest:path}", site.not_found, ["GET"]))  # last: after every page
    for path, endpoint, methods in routes:
        app.add_route(path, endpoint, methods=methods, include_in_schema=False)
    return site


def _no_icon(request: Request) -> Response:
    """No icon: browsers ask for one on a site's first page, and a 404 is a console error."""
    return Response(status_code=204)
