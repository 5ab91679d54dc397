"""Ops on the team of a served brain: users, their roles, their tokens, the write log.

The command line's only (no HTTP path, no MCP tool): whoever may open the home, or connect to
the PostgreSQL index, administers its team.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from brainmap.errors import UserError
from brainmap.ops.core import Brain, _Input, op
from brainmap.ops.library import NoInput
from brainmap.store.team import WriteRow
from brainmap.team import (
    NewToken,
    Role,
    Team,
    TokenInfo,
    UserInfo,
    check_libraries,
    parse_duration,
)

RoleName = Literal["read", "write", "admin"]


class UserInput(_Input):
    name: str = Field(max_length=64, description="The user's name.")


class UserAddInput(UserInput):
    role: RoleName | None = Field(None, description="A role to grant at once.")
    library: list[str] = Field(
        default_factory=list, description="Where the role holds; every library when empty."
    )


@dataclass
class UserAdded:
    name: str
    roles: dict[str, str]
    first: bool  # the team's first user: a running server asks for tokens once restarted
    team: str  # where the team is kept


@op("user_add", UserAddInput, UserAdded, writes=True)
def user_add(brain: Brain, inp: UserAddInput) -> UserAdded:
    """Add a user to the team (and give them a role at once)."""
    check_libraries(inp.library)  # before the user is added: a bad name leaves no trace
    with Team(brain.cfg) as team:
        first = not team.active()
        team.add_user(inp.name)
        roles: dict[str, str] = {}
        if inp.role is not None:
            for library in team.grant(inp.name, Role.parse(inp.role), inp.library):
                roles[library] = inp.role
        return UserAdded(inp.name, roles, first, team.location)


@dataclass
class UserList:
    users: list[UserInfo]
    team: str


@op("user_list", NoInput, UserList)
def user_list(brain: Brain, inp: NoInput) -> UserList:
    """The team's users, their roles and how many usable tokens each has."""
    with Team(brain.cfg) as team:
        users = team.users() if team.active() else []
        return UserList(users, team.location)


@dataclass
class UserRemoved:
    name: str


@op("user_remove", UserInput, UserRemoved, writes=True)
def user_remove(brain: Brain, inp: UserInput) -> UserRemoved:
    """Remove a user with their roles and tokens (their lines of the write log stay)."""
    with Team(brain.cfg) as team:
        team.remove_user(inp.name)
        return UserRemoved(inp.name)


class GrantInput(UserInput):
    role: RoleName = Field(description="read, write or admin.")
    library: list[str] = Field(
        default_factory=list, description="Where the role holds; every library ('*') when empty."
    )


@dataclass
class Granted:
    name: str
    role: str
    libraries: list[str]


@op("user_grant", GrantInput, Granted, writes=True)
def user_grant(brain: Brain, inp: GrantInput) -> Granted:
    """Give a user a role on libraries (replacing the role they had on each)."""
    with Team(brain.cfg) as team:
        return Granted(inp.name, inp.role, team.grant(inp.name, Role.parse(inp.role), inp.library))


class RevokeInput(UserInput):
    library: list[str] = Field(
        default_factory=list,
        description="The libraries ('*' too); all the user's roles when empty.",
    )


@dataclass
class Revoked:
    name: str
    removed: int


@op("user_revoke", RevokeInput, Revoked, writes=True)
def user_revoke(brain: Brain, inp: RevokeInput) -> Revoked:
    """Take a user's roles on libraries (all of them when none is named)."""
    with Team(brain.cfg) as team:
        return Revoked(inp.name, team.revoke(inp.name, inp.library))


class TokenCreateInput(UserInput):
    label: str = Field("", max_length=100, description="What the token is for (a laptop, a CI).")
    expires: str | None = Field(
        None, max_length=10, description="How long it lasts: 90d, 12w, 6m, 1y; never when empty."
    )


@op("token_create", TokenCreateInput, NewToken, writes=True)
def token_create(brain: Brain, inp: TokenCreateInput) -> NewToken:
    """Make a token for a user: shown once, kept only as its SHA-256 digest."""
    expires = parse_duration(inp.expires) if inp.expires else None
    with Team(brain.cfg) as team:
        return team.new_token(inp.name, inp.label, expires)


class TokenListInput(_Input):
    name: str | None = Field(None, max_length=64, description="Only this user's tokens.")


@dataclass
class TokenList:
    tokens: list[TokenInfo]


@op("token_list", TokenListInput, TokenList)
def token_list(brain: Brain, inp: TokenListInput) -> TokenList:
    """The team's tokens (never the tokens themselves): label, dates, state."""
    with Team(brain.cfg) as team:
        return TokenList(team.tokens(inp.name) if team.active() else [])


class TokenRevokeInput(_Input):
    id: int = Field(ge=1, description="The token's number (brainmap token list).")


@op("token_revoke", TokenRevokeInput, TokenInfo, writes=True)
def token_revoke(brain: Brain, inp: TokenRevokeInput) -> TokenInfo:
    """Revoke a token: servers refuse it within two seconds."""
    with Team(brain.cfg) as team:
        return team.revoke_token(inp.id)


class WriteLogInput(_Input):
    user: str | None = Field(None, max_length=64, description="Only this user's writes.")
    library: str | None = Field(None, max_length=64, description="Only writes to this library.")
    since: dt.date | None = Field(None, description="Only from this day on (UTC).")
    limit: int = Field(50, ge=1, le=10_000)


@dataclass
class WriteLog:
    writes: list[WriteRow] = field(default_factory=list)


@op("write_log", WriteLogInput, WriteLog)
def write_log(brain: Brain, inp: WriteLogInput) -> WriteLog:
    """Who wrote what through a served brain, newest first: each save, ingest, supersede,
    verify, reindex, collect, git-import and map recompute a user asked for, done, unchanged,
    refused
    or failed, one line per library it touched."""
    with Team(brain.cfg) as team:
        if not team.exists():
            raise UserError("this brain has no team yet", hint="brainmap user add NAME")
        since = inp.since.isoformat() if inp.since else None
        return WriteLog(team.repo.writes(member=inp.user, library=inp.library, since=since,
                                         limit=inp.limit))  # fmt: skip
