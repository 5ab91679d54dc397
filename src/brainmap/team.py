"""The people a served brain answers: users, their role on each library, their tokens.

A role is read, write or admin, given per library or on every library (``*``); a higher role
includes the lower ones. A token is shown once, when it is made: the team keeps only its
SHA-256 digest (a token is 32 random bytes, so a digest cannot be reversed by guessing), and
a server finds the user from the digest of what a client sends. ``brainmap serve`` asks for a
token on every request once the team has a user (:func:`Team.active`).
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from brainmap.config import Config, check_library_name
from brainmap.errors import UserError
from brainmap.store.team import TeamRepo, TokenRow, WriteRow, open_sqlite

EVERY_LIBRARY = "*"
TOKEN_PREFIX = "bmt_"  # says what a leaked string is (secret scanners key on prefixes)
#: How long a server trusts what it read of a token: a revoked token stops working within this
CACHE_SECONDS = 2.0
TOUCH_SECONDS = 60.0  # a token's last use is written at most this often
_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
_DURATION = re.compile(r"([0-9]{1,5}) ?([dwmy])")
_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}
MAX_DAYS = 36_500  # a token's life at most (a date beyond year 9999 does not exist)


class Role(enum.IntEnum):
    """What a user may do in a library; each includes the ones below it."""

    READ = 1  # search, get, ask, the graph, the map
    WRITE = 2  # save, ingest, supersede, verify
    ADMIN = 3  # reindex, collect, git-import, map recompute; stats and doctor with '*'

    @classmethod
    def parse(cls, name: str) -> Role:
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise UserError(
                f"unknown role {name!r}", hint="a role is read, write or admin"
            ) from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: a user and their roles, by library (``*``: every one)."""

    user: str
    roles: Mapping[str, Role]
    token_id: int | None = None

    def role_on(self, library: str) -> Role | None:
        given = [r for r in (self.roles.get(library), self.roles.get(EVERY_LIBRARY)) if r]
        return max(given) if given else None

    def may(self, role: Role, library: str) -> bool:
        held = self.role_on(library)
        return held is not None and held >= role

    def may_everywhere(self, role: Role) -> bool:
        held = self.roles.get(EVERY_LIBRARY)
        return held is not None and held >= role

    def may_somewhere(self, role: Role) -> bool:
        return any(held >= role for held in self.roles.values())

    def within(self, role: Role, libraries: Iterable[str]) -> list[str]:
        """Those of ``libraries`` on which the user holds ``role``."""
        return [name for name in libraries if self.may(role, name)]


#: The holder of ``brainmap serve --token``: whoever started the server, admin everywhere
OWNER = Principal("owner", {EVERY_LIBRARY: Role.ADMIN})


@dataclass
class UserInfo:
    """A user as ``brainmap user list`` shows them."""

    name: str
    created_at: str
    roles: dict[str, str]  # library (or '*') -> role
    tokens: int  # usable ones: neither revoked nor expired


@dataclass
class NewToken:
    """A token just made: ``token`` is shown this once and never stored."""

    token: str
    id: int
    user: str
    label: str
    expires_at: str | None


@dataclass
class TokenInfo:
    id: int
    user: str
    label: str
    created_at: str
    expires_at: str | None
    last_used_at: str | None
    revoked_at: str | None
    state: str  # active, expired or revoked


def _info(row: TokenRow, at: str) -> TokenInfo:
    return TokenInfo(row.id, row.member, row.label, row.created_at, row.expires_at,
                     row.last_used_at, row.revoked_at, token_state(row, at))  # fmt: skip


def mint() -> str:
    """A new token: the prefix and 32 random bytes (43 URL-safe characters)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> str:
    """What the team keeps of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def now() -> str:
    """The time as the team records it: ISO 8601 in UTC, to the second."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(text: str) -> dt.timedelta:
    """``90d``, ``12w``, ``6m``, ``1y`` as a length of time (a month is 30 days)."""
    match = _DURATION.fullmatch(text.strip().lower())
    days = int(match.group(1)) * _DAYS[match.group(2)] if match else 0
    if not 0 < days <= MAX_DAYS:
        raise UserError(
            f"not a duration: {text!r}",
            hint="a number and d, w, m or y, such as 90d or 1y, up to 100y",
        )
    return dt.timedelta(days=days)


def check_user_name(name: str) -> None:
    if not _USER.fullmatch(name):
        raise UserError(
            f"invalid user name {name!r}",
            hint="use letters, digits, '.', '_', '@', '+' or '-' (up to 64, starting with a "
            "letter or digit)",
        )


def check_libraries(libraries: Iterable[str]) -> None:
    """Refuse a grant on a name that cannot be a library's (``*`` is every library)."""
    for library in libraries:
        if library != EVERY_LIBRARY:
            check_library_name(library)


def token_state(row: TokenRow, at: str) -> str:
    if row.revoked_at is not None:
        return "revoked"
    if row.expires_at is not None and row.expires_at <= at:
        return "expired"
    return "active"


class Team:
    """The users of one home's brain, in ``team.db`` or beside a PostgreSQL index; safe to
    share between a server's threads (one connection, used under a lock)."""

    def __init__(self, cfg: Config) -> None:
        self._path: Path = cfg.team_path
        self._url = cfg.store_url
        self._repo: TeamRepo | None = None
        self._lock = threading.Lock()
        # token digest -> (when read, the principal or None), and when each token was touched
        self._seen: dict[str, tuple[float, Principal | None]] = {}
        self._touched: dict[int, float] = {}

    @property
    def repo(self) -> TeamRepo:
        """The team's tables: in the ``brainmap_team`` schema of the PostgreSQL database when
        the index is there, else in ``team.db`` (created when missing)."""
        with self._lock:
            if self._repo is None:
                if self._url:
                    from brainmap.store.postgres.database import PgTeamDatabase

                    self._repo = TeamRepo(PgTeamDatabase(self._url))
                else:
                    self._repo = open_sqlite(self._path)
            return self._repo

    def exists(self) -> bool:
        """Whether a team was ever made here (nothing is created to find out)."""
        if self._url:
            from brainmap.store.postgres.database import has_team

            return has_team(self._url)
        return self._path.exists()

    def close(self) -> None:
        with self._lock:
            if self._repo is not None:
                self._repo.close()
                self._repo = None

    def __enter__(self) -> Team:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def location(self) -> str:
        """Where the team lives, as shown to people."""
        if self._url:
            return "schema brainmap_team of the index's PostgreSQL database"
        return str(self._path)

    def active(self) -> bool:
        """Whether the team has a user: a server then asks every request for a token."""
        if self._repo is None and not self.exists():
            return False  # a personal brain never makes one
        return self.repo.member_count() > 0

    # users and roles

    def add_user(self, name: str) -> None:
        check_user_name(name)
        if not self.repo.add_member(name, now()):
            raise UserError(f"user {name!r} exists", hint=f"brainmap user grant {name} ...",
                            status=409)  # fmt: skip

    def remove_user(self, name: str) -> None:
        self._made()
        if not self.repo.remove_member(name):
            raise self._no_user(name)
        self._forget()

    def users(self) -> list[UserInfo]:
        at = now()
        roles: dict[str, dict[str, str]] = {}
        for row in self.repo.grants():
            roles.setdefault(row.member, {})[row.library] = row.role
        usable: dict[str, int] = {}
        for token in self.repo.tokens():
            if token_state(token, at) == "active":
                usable[token.member] = usable.get(token.member, 0) + 1
        return [
            UserInfo(m.name, m.created_at, roles.get(m.name, {}), usable.get(m.name, 0))
            for m in self.repo.members()
        ]

    def grant(self, name: str, role: Role, libraries: Sequence[str]) -> list[str]:
        """Give ``name`` ``role`` on ``libraries`` (none: every library); the libraries."""
        targets = list(dict.fromkeys(libraries)) or [EVERY_LIBRARY]
        check_libraries(targets)
        self._known(name)
        at = now()
        for library in targets:
            self.repo.grant(name, library, role.label, at)
        self._forget()
        return targets

    def revoke(self, name: str, libraries: Sequence[str]) -> int:
        """Take ``name``'s roles on ``libraries`` (none: all their roles); how many went."""
        self._known(name)
        taken = self.repo.revoke(name, list(libraries) or None)
        self._forget()
        return taken

    # tokens

    def new_token(
        self, name: str, label: str = "", expires: dt.timedelta | None = None
    ) -> NewToken:
        self._known(name)
        token = mint()
        made = dt.datetime.now(dt.UTC)
        until = (made + expires).strftime("%Y-%m-%dT%H:%M:%SZ") if expires else None
        label = label.strip()[:100] or f"token of {made:%Y-%m-%d}"
        token_id = self.repo.add_token(name, digest(token), label, now(), until)
        return NewToken(token, token_id, name, label, until)

    def tokens(self, name: str | None = None) -> list[TokenInfo]:
        if name is not None:
            self._known(name)
        at = now()
        return [_info(t, at) for t in self.repo.tokens(name)]

    def revoke_token(self, token_id: int) -> TokenInfo:
        self._made()
        row = self.repo.revoke_token(token_id, now())
        if row is None:
            raise UserError(f"no token {token_id}", hint="brainmap token list", status=404)
        self._forget()
        return _info(row, now())

    def authenticate(self, token: str) -> Principal | None:
        """The user a token belongs to, with their roles; None for a token that is unknown,
        revoked or expired. What was read is trusted for :data:`CACHE_SECONDS`."""
        key = digest(token)
        return self._cached(key, lambda: self.repo.token_by_digest(key))

    def cached(self, token: str) -> Principal | None:
        """The user :meth:`authenticate` found for this token in the last
        :data:`CACHE_SECONDS`, if it did (None: ask it)."""
        with self._lock:
            seen = self._seen.get(digest(token))
        if seen is not None and time.monotonic() - seen[0] < CACHE_SECONDS:
            return seen[1]
        return None

    def signed_in(self, token_id: int) -> Principal | None:
        """The user of the token numbered ``token_id`` (a GUI sign-in names its token by
        number), as :meth:`authenticate` finds them."""
        return self._cached(f"id:{token_id}", lambda: self.repo.token_by_id(token_id))

    def _cached(self, key: str, read: Callable[[], TokenRow | None]) -> Principal | None:
        moment = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
        if seen is not None and moment - seen[0] < CACHE_SECONDS:
            return seen[1]
        principal = self._principal(read())
        with self._lock:
            if len(self._seen) > 10_000:  # guesses must not grow it without bound
                self._seen.clear()
            self._seen[key] = (moment, principal)
        return principal

    def _principal(self, row: TokenRow | None) -> Principal | None:
        at = now()
        if row is None or token_state(row, at) != "active":
            return None
        roles = {g.library: Role.parse(g.role) for g in self.repo.grants(row.member)}
        moment = time.monotonic()
        if moment - self._touched.get(row.id, -TOUCH_SECONDS) >= TOUCH_SECONDS:
            self._touched[row.id] = moment
            self.repo.touch_token(row.id, at)
        return Principal(row.member, roles, row.id)

    def _forget(self) -> None:
        with self._lock:
            self._seen.clear()

    def _known(self, name: str) -> None:
        self._made()
        if name not in {m.name for m in self.repo.members()}:
            raise self._no_user(name)

    def _made(self) -> None:
        """Refuse to change a team that was never made (and make none to find out)."""
        if self._repo is None and not self.exists():
            raise UserError("this brain has no team yet", hint="brainmap user add NAME")

    @staticmethod
    def _no_user(name: str) -> UserError:
        return UserError(f"no user {name!r}", hint="brainmap user list", status=404)

    # the write log

    def log(self, rows: Sequence[WriteRow]) -> None:
        self.repo.log(rows)
