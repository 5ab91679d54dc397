"""CLI commands of the team of a served brain: ``brainmap user ...`` and ``brainmap token ...``.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import datetime as dt

import click

from brainmap.cli.app import CONTEXT, cli
from brainmap.cli.common import json_option, open_brain, print_json, validate

_ROLE = click.Choice(["read", "write", "admin"])


@cli.group(context_settings=CONTEXT)
def user() -> None:
    """The users of a served brain, their roles per library, and who wrote what.

    Once the team has a user, `brainmap serve` asks every request for a token and lets each
    user read, write or administer only the libraries their roles name (read < write <
    admin; a role on '*' holds on every library). The team lives outside the index: in
    team.db in the home, or beside a PostgreSQL index in its schema brainmap_team.

    \b
    Examples:
      brainmap user add alice --role write --library docs
      brainmap user grant bob read            # every library
      brainmap token create alice --label laptop --expires 90d
      brainmap user log --user alice
    """


@user.command("add")
@click.argument("name")
@click.option("--role", type=_ROLE, help="A role to grant at once.")
@click.option(
    "--library", "-l", multiple=True, help="Where --role holds (repeatable; default: everywhere)."
)
@json_option
def user_add(name: str, role: str | None, library: tuple[str, ...], json_out: bool) -> None:
    """Add the user NAME (letters, digits, '.', '_', '@', '+', '-').

    \b
    Examples:
      brainmap user add alice --role write --library docs --library notes
      brainmap user add ci --role read
    """
    from brainmap import ops

    if library and role is None:
        raise click.UsageError("--library needs --role")
    inp = validate(ops.UserAddInput, name=name, role=role, library=list(library))
    added = ops.user_add(open_brain(), inp)
    if json_out:
        return print_json(added)
    roles = ", ".join(f"{r} on {lib}" for lib, r in added.roles.items()) or "no role yet"
    click.echo(f"added {added.name} ({roles}) to the team in {added.team}")
    if not added.roles:
        click.echo(f"next: brainmap user grant {added.name} read|write|admin [LIBRARY ...]")
    click.echo(f"then: brainmap token create {added.name}")
    if added.first:
        click.echo("the team's first user: a running `brainmap serve` asks every request for a "
                   "token once it is restarted")  # fmt: skip
    return None


@user.command("list")
@json_option
def user_list(json_out: bool) -> None:
    """List the users, their roles and how many usable tokens each has.

    \b
    Example:
      brainmap user list --json
    """
    from brainmap import ops
    from brainmap.termsafe import one_line

    found = ops.user_list(open_brain(), ops.NoInput())
    if json_out:
        return print_json(found)
    if not found.users:
        click.echo("no users: `brainmap serve` answers without tokens (on 127.0.0.1 only)")
        click.echo("hint: brainmap user add NAME --role read")
        return None
    for info in found.users:
        roles = ", ".join(f"{r} on {lib}" for lib, r in sorted(info.roles.items())) or "no role"
        tokens = f"{info.tokens} token{'s' if info.tokens != 1 else ''}"
        click.echo(f"{click.style(one_line(info.name), bold=True)}  {roles}  ({tokens})")
    return None


@user.command("remove")
@click.argument("name")
@json_option
def user_remove(name: str, json_out: bool) -> None:
    """Remove the user NAME with their roles and tokens (the write log keeps their lines).

    \b
    Example:
      brainmap user remove bob
    """
    from brainmap import ops

    removed = ops.user_remove(open_brain(), validate(ops.UserInput, name=name))
    if json_out:
        return print_json(removed)
    click.echo(f"removed {removed.name}: their tokens no longer work")
    return None


@user.command("grant")
@click.argument("name")
@click.argument("role", type=_ROLE, metavar="ROLE")
@click.argument("libraries", nargs=-1)
@json_option
def user_grant(name: str, role: str, libraries: tuple[str, ...], json_out: bool) -> None:
    """Give NAME the ROLE on LIBRARIES (none: every library). A role replaces the one the
    user had on that library; read lets them search and read, write also save and ingest,
    admin also reindex, collect, git-import and recompute the map (and, on every library,
    see stats and doctor).

    \b
    Examples:
      brainmap user grant alice write docs notes
      brainmap user grant ops admin
    """
    from brainmap import ops

    inp = validate(ops.GrantInput, name=name, role=role, library=list(libraries))
    granted = ops.user_grant(open_brain(), inp)
    if json_out:
        return print_json(granted)
    click.echo(f"{granted.name} may now {granted.role} {', '.join(granted.libraries)}")
    return None


@user.command("revoke")
@click.argument("name")
@click.argument("libraries", nargs=-1)
@json_option
def user_revoke(name: str, libraries: tuple[str, ...], json_out: bool) -> None:
    """Take NAME's roles on LIBRARIES ('*' is the role on every library); all of their
    roles when none is named. Servers apply it within two seconds.

    \b
    Examples:
      brainmap user revoke alice notes
      brainmap user revoke bob
    """
    from brainmap import ops

    inp = validate(ops.RevokeInput, name=name, library=list(libraries))
    revoked = ops.user_revoke(open_brain(), inp)
    if json_out:
        return print_json(revoked)
    click.echo(f"took {revoked.removed} role{'s' if revoked.removed != 1 else ''} from "
               f"{revoked.name}")  # fmt: skip
    return None


@user.command("log")
@click.option("--user", "who", help="Only this user's writes.")
@click.option("--library", "-l", help="Only writes to this library.")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), help="From this day on (UTC).")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@json_option
def user_log(
    who: str | None, library: str | None, since: dt.datetime | None, limit: int, json_out: bool
) -> None:
    """Who wrote what through a served brain, newest first: every write a user asked for
    (save, ingest, supersede, verify, reindex, collect, git-import, map recompute): done,
    unchanged (a near-duplicate the save refused), refused or failed, a line per library it
    touched.

    \b
    Examples:
      brainmap user log
      brainmap user log --user alice --since 2026-11-01 --json
    """
    from brainmap import ops
    from brainmap.termsafe import one_line

    inp = validate(ops.WriteLogInput, user=who, library=library,
                   since=since.date() if since else None, limit=limit)  # fmt: skip
    found = ops.write_log(open_brain(), inp)
    if json_out:
        return print_json(found)
    if not found.writes:
        click.echo("no writes logged")
        return None
    colour = {"done": "green", "unchanged": "blue", "refused": "red", "failed": "yellow"}
    for row in found.writes:
        where = f" {row.library}" if row.library else ""
        what = f" {one_line(row.target)}" if row.target else ""
        why = f"  ({one_line(row.detail)})" if row.detail else ""
        click.echo(f"{row.at}  {one_line(row.member)}  {row.interface}  {row.op}{where}{what}  "
                   + click.style(row.outcome, fg=colour[row.outcome]) + why)  # fmt: skip
    return None


@cli.group(context_settings=CONTEXT)
def token() -> None:
    """The tokens of the team's users: made, listed, revoked.

    A token is shown once, when it is made; the team keeps only its SHA-256 digest. Clients
    send it as `Authorization: Bearer TOKEN`; the web GUI has a sign-in page for it.

    \b
    Examples:
      brainmap token create alice --label laptop --expires 90d
      brainmap token list alice
      brainmap token revoke 3
    """


@token.command("create")
@click.argument("name")
@click.option("--label", default="", help="What the token is for (a laptop, a CI job).")
@click.option("--expires", help="How long it lasts: 90d, 12w, 6m, 1y (default: until revoked).")
@json_option
def token_create(name: str, label: str, expires: str | None, json_out: bool) -> None:
    """Make a token for the user NAME and print it (this once: it is not kept).

    \b
    Examples:
      brainmap token create alice --label laptop --expires 90d
      curl -H "Authorization: Bearer $TOKEN" 'http://team-host:8765/search?query=deploy'
    """
    from brainmap import ops

    inp = validate(ops.TokenCreateInput, name=name, label=label, expires=expires)
    made = ops.token_create(open_brain(), inp)
    if json_out:
        return print_json(made)
    until = f", until {made.expires_at}" if made.expires_at else ""
    click.echo(f"token {made.id} of {made.user} ({made.label}{until}); shown this once:",
               err=True)  # fmt: skip
    click.echo(made.token)
    return None


@token.command("list")
@click.argument("name", required=False)
@json_option
def token_list(name: str | None, json_out: bool) -> None:
    """List the tokens (of the user NAME): number, label, dates and state, never the token.

    \b
    Example:
      brainmap token list alice
    """
    from brainmap import ops
    from brainmap.termsafe import one_line

    found = ops.token_list(open_brain(), validate(ops.TokenListInput, name=name))
    if json_out:
        return print_json(found)
    if not found.tokens:
        click.echo("no tokens")
        return None
    colour = {"active": "green", "expired": "yellow", "revoked": "red"}
    for t in found.tokens:
        used = f", last used {t.last_used_at}" if t.last_used_at else ", never used"
        until = f", expires {t.expires_at}" if t.expires_at and t.state == "active" else ""
        click.echo(f"{t.id:>4}  {one_line(t.user)}  {one_line(t.label)}  made {t.created_at}"
                   f"{until}{used}  " + click.style(t.state, fg=colour[t.state]))  # fmt: skip
    return None


@token.command("revoke")
@click.argument("token_id", metavar="ID", type=int)
@json_option
def token_revoke(token_id: int, json_out: bool) -> None:
    """Revoke the token number ID: servers refuse it within two seconds.

    \b
    Example:
      brainmap token revoke 3
    """
    from brainmap import ops

    revoked = ops.token_revoke(open_brain(), validate(ops.TokenRevokeInput, id=token_id))
    if json_out:
        return print_json(revoked)
    click.echo(f"revoked token {revoked.id} of {revoked.user} ({revoked.label})")
    return None
