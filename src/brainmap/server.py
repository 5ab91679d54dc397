"""HTTP: every served op as a REST path, ``/openapi.json``, and MCP (streamable HTTP) at ``/mcp``.

One FastAPI app made from the operations table. A guard in front of everything checks the
Host header (DNS rebinding), the Origin of browser requests (on /mcp and on every
state-changing request), the bearer token when one is set, and the body size.
Errors are RFC 9457 problem details with the right 4xx status.
"""

# No `from __future__ import annotations` here: FastAPI reads the endpoint signatures built
# below at runtime.

import hmac
import inspect
import ipaddress
import json
import logging
import re
import secrets
import socket
import time
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import urlencode

import anyio
from fastapi import Body, FastAPI, Path, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic.warnings import UnsupportedFieldAttributeWarning
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brainmap import __version__
from brainmap.errors import UserError
from brainmap.gui import install as install_gui
from brainmap.gui.account import LOGIN as LOGIN_PATH
from brainmap.gui.account import SESSION_COOKIE, SESSION_SECONDS
from brainmap.longlived import settle_heap
from brainmap.mcp_server import ScopedEndpoint, create_server
from brainmap.ops import Brain, NoInput, Op, describe_errors, served, to_json
from brainmap.ops.access import PRINCIPAL, requester, run
from brainmap.team import OWNER, Principal, Team

log = logging.getLogger("brainmap.server")
# FastAPI puts an alias on the parameter that carries a query-parameter model; pydantic warns
# that it has no effect there (it does not need one)
warnings.filterwarnings(
    "ignore",
    message="The 'alias' attribute with value 'inp'",
    category=UnsupportedFieldAttributeWarning,
)

DEFAULT_PORT = 8765
DEFAULT_MAX_BODY = 2 * 1024 * 1024
SHUTDOWN_GRACE_S = 3  # on SIGTERM, requests in flight get this long to finish
MIN_TOKEN = 16  # characters; a short token falls to guessing
_TOKEN = re.compile(r"[\x21-\x7e]+")  # what a client can send after "Bearer "
PROBLEM = "application/problem+json"
JSON = "application/json"
_UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
_SESSION = re.compile(r"[0-9]{1,18}\.[0-9]{1,12}\.[0-9a-f]{64}")  # token number, until, MAC
PageError = Callable[[int, str, str | None], Response]  # the GUI's HTML error page


def is_page(path: str) -> bool:
    """Whether ``path`` is one of the GUI's (its errors are HTML pages, not problem JSON)."""
    return path in {"/", "/ui"} or path.startswith("/ui/")


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    hint: str | None = None


def problem(
    status: int, detail: str, hint: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = Problem(title=HTTPStatus(status).phrase, status=status, detail=detail, hint=hint)
    return JSONResponse(
        body.model_dump(exclude_none=True), status_code=status, media_type=PROBLEM, headers=headers
    )


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Keys:
    """The tokens a server takes: the owner's (``--token``) and, with a team, its users'; and
    the GUI's sign-ins, which name the token that signed in without holding it."""

    def __init__(self, token: str | None, team: Team | None) -> None:
        self.token = token.encode("utf-8") if token is not None else None
        self.team = team
        self._secret = secrets.token_bytes(32)  # a restart ends every sign-in

    @property
    def needed(self) -> bool:
        """Whether every request must carry one."""
        return self.token is not None or self.team is not None

    def principal(self, given: str) -> Principal | None:
        """Who a token belongs to: the owner, a user of the team, or nobody. Without a team,
        the owner's token is all there is and no rules apply."""
        if self._is_owner(given):
            return OWNER
        return self.team.authenticate(given) if self.team is not None else None

    def known(self, given: str) -> Principal | None:
        """Who a token belongs to when that needs no database (the owner's token, or one
        checked in the last seconds): the guard then answers without a worker thread."""
        if self._is_owner(given):
            return OWNER
        return self.team.cached(given) if self.team is not None else None

    def _is_owner(self, given: str) -> bool:
        try:  # compare bytes: compare_digest refuses non-ASCII str
            sent = given.encode("latin-1")
        except UnicodeEncodeError:  # no token of ours has such a character
            return False
        return self.token is not None and hmac.compare_digest(sent, self.token)

    def session(self, principal: Principal) -> str:
        """The sign-in cookie of ``principal``: which token signed in (0: the owner's) and
        until when, signed with this server's secret over those and the user's name. It is
        no token: no API takes it."""
        body = f"{principal.token_id or 0}.{int(time.time()) + SESSION_SECONDS}"
        return f"{body}.{self._mac(body, principal.user)}"

    def signed_in(self, cookie: str) -> Principal | None:
        """Who a sign-in cookie names, while it lasts, their token still works and it is
        still theirs."""
        if not _SESSION.fullmatch(cookie):
            return None
        token_id, until, mac = cookie.split(".")
        if int(until) < time.time():
            return None
        if token_id == "0":
            principal = OWNER if self.token is not None else None
        else:
            principal = self.team.signed_in(int(token_id)) if self.team is not None else None
        if principal is None:
            return None
        expected = self._mac(f"{token_id}.{until}", principal.user).encode()
        return (
            principal if hmac.compare_digest(mac.encode("latin-1", "replace"), expected) else None
        )

    def _mac(self, body: str, user: str) -> str:
        return hmac.new(self._secret, f"{body}.{user}".encode(), "sha256").hexdigest()


class Guard:
    """ASGI middleware: Host, Origin, bearer token and body size, for every route."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: set[str],
        port: int | None,
        keys: Keys,
        max_body: int,
        page_error: PageError | None = None,
    ) -> None:
        """With a team in ``keys``, every request needs a token of one of its users (or the
        owner's): the user is left in the scope for the ops' rules."""
        self.app = app
        self.page_error = page_error
        self.keys = keys
        self.allowed_hosts = {h.lower() for h in allowed_hosts}
        # a browser page may call us only from our own origin: same host name *and* port
        self.allowed_origins = {
            f"{scheme}://{host}{suffix}"
            for host in self.allowed_hosts
            for scheme, suffix in (("http", f":{port}"), ("https", f":{port}"))
        }
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # none are served; refuse rather than pass unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal is None:
            refusal = await self._authenticate(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        length = headers.get("content-length", "")
        if length.isdigit():
            if int(length) > self.max_body:
                await self._too_large(scope, receive, send)
                return
        elif scope["method"] in _UNSAFE_METHODS:  # a streamed body: read it all, within the limit
            body = await self._buffer(receive)
            if body is None:
                await self._too_large(scope, receive, send)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> ASGIApp | None:
        refusal = self._refusal_problem(scope, headers)
        return None if refusal is None else self._for(scope, refusal)

    def _for(self, scope: Scope, refusal: JSONResponse) -> Response:
        """A refusal as the client reads it: the GUI's HTML error page on its paths (same
        status and challenge), problem JSON everywhere else."""
        if self.page_error is None or not is_page(scope["path"]):
            return refusal
        body = json.loads(bytes(refusal.body))
        page = self.page_error(refusal.status_code, body["detail"], body.get("hint"))
        if "www-authenticate" in refusal.headers:
            page.headers["www-authenticate"] = refusal.headers["www-authenticate"]
        return page

    def _refusal_problem(self, scope: Scope, headers: dict[str, str]) -> JSONResponse | None:
        given = headers.get("host", "")
        host = _hostname(given)
        if host is None or host not in self.allowed_hosts:
            return problem(421, f"requests for host {given!r} are not served here",
                           "use the address the server was started with, or start it with "
                           "--allow-host NAME")  # fmt: skip
        origin = headers.get("origin")
        path, method = scope["path"], scope["method"]
        browser_write = method in _UNSAFE_METHODS or path.startswith("/mcp")
        if (
            browser_write
            and origin is not None
            and origin.lower().rstrip("/") not in self.allowed_origins
        ):
            return problem(403, f"cross-origin request from {origin} refused")
        if browser_write and headers.get("sec-fetch-site") == "cross-site":
            return problem(403, "cross-site request refused")
        return None

    async def _authenticate(self, scope: Scope, headers: dict[str, str]) -> ASGIApp | None:
        """Refuse a request without a valid token when one is needed; leave its user in the
        scope when the server has a team. The GUI's pages also take the sign-in cookie, and
        a browser without one is sent to the sign-in page."""
        if not self.keys.needed:
            return None
        path = scope["path"]
        if path in (LOGIN_PATH, "/favicon.ico"):  # signing in needs none yet; the icon is none
            return None
        given = bearer(headers)
        signed = cookie(headers, SESSION_COOKIE) if given is None and is_page(path) else None
        principal = None
        try:
            if given is not None:
                principal = self.keys.known(given)  # the owner's, or seen in the last seconds
                if principal is None:
                    principal = await anyio.to_thread.run_sync(self.keys.principal, given)
            elif signed is not None:
                principal = await anyio.to_thread.run_sync(self.keys.signed_in, signed)
        except Exception:  # the team's database: busy, gone, unreachable
            log.exception("could not check a token")
            return self._for(scope, problem(503, "the team's tokens cannot be checked now",
                                            "try again in a moment"))  # fmt: skip
        if principal is not None:
            if self.keys.team is not None:
                scope[PRINCIPAL] = principal
            return None
        if is_page(path) and scope["method"] in ("GET", "HEAD"):
            target = path + (f"?{scope['query_string'].decode('latin-1')}"
                             if scope.get("query_string") else "")  # fmt: skip
            return RedirectResponse(f"{LOGIN_PATH}?{urlencode({'next': target})}", 303)
        return self._for(scope, problem(401, "a valid bearer token is required",
                         headers={"WWW-Authenticate": 'Bearer realm="brainmap"'}))  # fmt: skip

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = problem(413, f"request body larger than {self.max_body} bytes")
        await self._for(scope, refusal)(scope, receive, send)

    async def _buffer(self, receive: Receive) -> bytes | None:
        """The whole streamed body, or None as soon as it passes the limit."""
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body:
                return None
            more = message.get("more_body", False)
        return b"".join(chunks)


def bearer(headers: dict[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if any."""
    scheme, _, given = headers.get("authorization", "").partition(" ")
    given = given.strip()
    return given if scheme.lower() == "bearer" and given else None


def cookie(headers: dict[str, str], name: str) -> str | None:
    """The value of cookie ``name`` (another site's cookies on the same host, whatever they
    hold, do not hide it)."""
    from starlette.requests import cookie_parser

    return cookie_parser(headers.get("cookie", "")).get(name) or None


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app an already read body, then defers to the real one."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


# RFC 9110 Host = uri-host [ ":" port ]; uri-host is an IP literal in brackets, an IPv4
# address or a reg-name. Nothing else may follow: "[::1]evil.com" names no host of ours.
_HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9._~%!$&'()*+,;=-]+)(?::[0-9]*)?")


def _hostname(value: str) -> str | None:
    """The host part of a Host header or an origin's authority (no port, brackets kept);
    None when the value is not ``host[:port]``."""
    match = _HOST.fullmatch(value.strip().lower())
    return match.group(1) if match else None


def allowed_hostnames(bind: str, extra: list[str]) -> set[str]:
    """Names a request may use to reach us: loopback names, the bound address, this
    machine's names when bound to every interface, and anything given with --allow-host."""
    names = {"localhost", "127.0.0.1", "[::1]"}
    if bind in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    else:
        names.add(f"[{bind}]" if ":" in bind else bind)
    return names | {_hostname(h) or h.lower() for h in extra}


# --- routes from the operations table -------------------------------------------------------

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "content": {PROBLEM: {}}, "description": description}
    for status, description in {
        400: "Bad input",
        401: "Missing or wrong bearer token",
        403: "Refused (read-only server, a role the user lacks, cross-origin, or a path "
        "outside the library)",
        404: "Not found",
        409: "Conflict with the current state",
        413: "Body too large",
        421: "Foreign Host header",
        422: "Invalid parameters",
    }.items()
}


def _endpoint(
    o: Op, brain: Brain, read_only: bool, method: str, team: Team | None
) -> Callable[..., Any]:
    """A FastAPI endpoint with a signature FastAPI can read: query, path or body input (and
    the request, for its user).

    An op whose path has parameters (``/get/{ref:path}``) takes exactly those fields."""
    in_path = re.findall(r"\{(\w+)", o.path)
    if o.input is NoInput:
        parameters: list[inspect.Parameter] = []
    elif in_path:
        fields = o.input.model_fields
        parameters = [
            _param(name, Annotated[str, Path(description=fields[name].description)])
            for name in in_path
        ]
    else:
        where = Query() if method == "GET" or o.in_query else Body()
        parameters = [_param("inp", Annotated[o.input, where])]

    def endpoint(request: Request, **given: Any) -> Any:
        if read_only and o.writes:
            raise UserError(f"{o.tool} is disabled: the server runs with --read-only", status=403)
        if o.input is NoInput:
            inp: BaseModel = NoInput()
        elif in_path:
            inp = o.input(**{name: given[name] for name in in_path})
        else:
            inp = given["inp"]
        result = run(o, brain, inp, "http", requester(request.scope, team, "http"))
        # serialised by the output's schema in one pass (FastAPI would validate the value
        # again, build dicts and dump those with json); the schema is still response_model's
        return Response(to_json(result, o.output), media_type=JSON)

    parameters.insert(0, _param("request", Request))
    endpoint.__signature__ = inspect.Signature(parameters, return_annotation=o.output)  # type: ignore[attr-defined]
    endpoint.__name__ = f"{o.tool}_{method.lower()}"
    return endpoint


def _add_route(
    app: FastAPI, o: Op, brain: Brain, read_only: bool, method: str, team: Team | None
) -> None:
    app.add_api_route(
        o.path,
        _endpoint(o, brain, read_only, method, team),
        methods=[method],
        response_model=o.output,
        summary=o.description.split("\n")[0].rstrip("."),
        description=o.description,
        operation_id=f"{o.tool}_{method.lower()}",
        tags=["write" if o.writes else "read"],
        responses={**_ERRORS},  # a copy per route: FastAPI keeps and extends it
    )


def _param(name: str, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)


def create_app(
    brain: Brain,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    token: str | None = None,
    read_only: bool = False,
    allow_hosts: list[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    team: Team | None = None,
) -> ASGIApp:
    """The whole HTTP application: REST + OpenAPI + MCP, behind the guard. With ``team``,
    every request needs a token of its users (or ``token``), and the ops' rules apply."""
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )

    # the Guard checks Host and Origin for every route, /mcp included
    manager = StreamableHTTPSessionManager(
        app=create_server(brain, read_only=read_only, team=team), max_request_body_size=max_body
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = FastAPI(
        title="brainmap",
        version=__version__,
        description="A local knowledge brain: hybrid search over markdown libraries. "
        "The same operations are MCP tools at /mcp (streamable HTTP).",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    for o in served():
        for method in o.methods:
            _add_route(app, o, brain, read_only, method, team)
    mcp_endpoint = ScopedEndpoint(StreamableHTTPASGIApp(manager))
    app.router.routes.append(Route("/mcp", endpoint=mcp_endpoint, methods=None))

    @app.get("/health", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok"}

    keys = Keys(token, team)
    # the web GUI at / (not in the OpenAPI); with tokens, it has a sign-in page
    site = install_gui(app, brain, read_only=read_only, team=team,
                       sign_in=keys if keys.needed else None)  # fmt: skip
    _install_error_handlers(app, site.error_page)
    return Guard(
        app,
        allowed_hosts=allowed_hostnames(host, allow_hosts or []),
        port=port,
        keys=keys,
        max_body=max_body,
        page_error=site.error_page,
    )


def _install_error_handlers(app: FastAPI, page_error: PageError) -> None:
    @app.exception_handler(UserError)
    async def user_error(request: Request, exc: UserError) -> JSONResponse:
        hint = exc.hint or (_parameters_hint(request) if exc.status == 422 else None)
        return problem(exc.status, exc.message, hint)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem(422, describe_errors(exc.errors()), _parameters_hint(request))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if is_page(request.url.path):  # e.g. a POST to a page that only answers GET: 405
            page = page_error(exc.status_code, str(exc.detail), None)
            page.headers.update(getattr(exc, "headers", None) or {})
            return page
        return problem(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def crash(_: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error")
        return problem(500, f"internal error: {type(exc).__name__}")


def _parameters_hint(request: Request) -> str:
    """Where the fields of the path a client got wrong are described."""
    return f"the parameters of {request.method} {request.url.path} are in /openapi.json"


def serve(
    brain: Brain,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    read_only: bool = False,
    allow_hosts: list[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    ready: Callable[[str], None] | None = None,
    team: Team | None = None,
) -> None:
    """Run the HTTP server until interrupted. Any address but loopback needs tokens: the
    owner's ``token``, or those of a ``team`` (which then applies its users' roles)."""
    import uvicorn

    check_token(token)
    if not is_loopback(host) and not token and team is None:
        raise UserError(
            f"serving on {host} exposes the brain to the network; a token is required",
            hint="pass --token (or set $BRAINMAP_TOKEN), add users (brainmap user add), or "
            "bind 127.0.0.1",
        )
    # bound before the app is made: with --port 0 the guard's own origin and the banner
    # need the port the system picked, not 0
    sockets = _listen(host, port)
    port = sockets[0].getsockname()[1]
    app = create_app(brain, host=host, port=port, token=token, read_only=read_only,
                     allow_hosts=allow_hosts, max_body=max_body, team=team)  # fmt: skip
    # a request stuck in a worker thread cannot be cancelled: without a bound, uvicorn waits
    # for it forever and SIGTERM never stops the server
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S)  # fmt: skip
    server = uvicorn.Server(config)
    if ready is not None:
        shown = f"[{host}]" if ":" in host else host
        ready(f"http://{shown}:{port}")
    if not read_only:  # a read-only server never saves
        brain.serve_writes(hand_writes=True)
    brain.share_search_connections()  # a save drops each one's page cache: a few, shared
    settle_heap()
    server.run(sockets=sockets)


def check_token(token: str | None) -> None:
    """Refuse a token that a client could not send, or could guess."""
    if token is not None and (len(token) < MIN_TOKEN or not _TOKEN.fullmatch(token)):
        raise UserError(
            f"the token (--token or $BRAINMAP_TOKEN) must be at least {MIN_TOKEN} printable "
            "ASCII characters, without spaces",
            hint="make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
        )


def _listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address of ``host``, all on one port (with port 0, the
    one the system picked for the first address), as uvicorn itself would bind them."""
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise UserError(f"cannot listen on {host}: {exc.strerror}", hint="check --host") from exc
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio does: one family per socket
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], port, *address[2:]))
            port = sock.getsockname()[1]
            sock.listen(2048)  # connections wait from now on, before the loop accepts them
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            hint="another program may use that port: pick another --port (0: any free one)",
        ) from exc
    return sockets


def openapi_document(brain: Brain) -> dict[str, Any]:
    """The OpenAPI document (snapshot-tested)."""
    app = create_app(brain)
    inner: Any = app
    while not isinstance(inner, FastAPI):
        inner = inner.app
    document: dict[str, Any] = json.loads(json.dumps(inner.openapi()))
    return document
