"""CLI commands that serve the operations: ``brainmap serve`` (HTTP + MCP) and ``mcp`` (stdio).

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import click

from brainmap.cli.app import cli
from brainmap.cli.common import open_brain


@cli.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but loopback needs --token or a team (brainmap user add).",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
    help="0: any free port (the first line printed says which).",
)  # fmt: skip
@click.option(
    "--token",
    envvar="BRAINMAP_TOKEN",
    help="Bearer token required on every request ($BRAINMAP_TOKEN): 16 or more printable "
    "ASCII characters, no spaces. With a team, the owner's token: admin on every library.",
)
@click.option(
    "--read-only", is_flag=True,
    help="Refuse every operation that writes (HTTP 403) and offer no MCP tool that does: save, "
    "ingest, reindex, git_import, verify, collect, supersede and map_recompute.",
)  # fmt: skip
@click.option("--allow-host", multiple=True, help="Extra Host name clients may use (repeatable).")
@click.option(
    "--max-body-mb",
    type=click.FloatRange(0.001, 1024),
    default=2.0,
    show_default=True,
    help="Largest request body.",
)
def serve(
    host: str, port: int, token: str | None, read_only: bool, allow_host: tuple[str, ...], max_body_mb: float
) -> None:  # fmt: skip
    """Serve the operations over HTTP (OpenAPI at /openapi.json), MCP at /mcp and the web GUI.

    Once the brain has a team (brainmap user add), every request needs a user's token and
    each user reads and writes only the libraries their roles allow; the GUI has a sign-in
    page. Users added while the server runs count from its next start.

    \b
    Examples:
      brainmap serve
      curl 'http://127.0.0.1:8765/search?query=docker+ports&limit=3'
      export BRAINMAP_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
      brainmap serve --host 0.0.0.0 --read-only
      brainmap user add alice --role write && brainmap serve --host 0.0.0.0
    """
    from brainmap.server import check_token
    from brainmap.server import serve as run_server
    from brainmap.team import Team

    check_token(token)  # before the model loads: a token that cannot work is a quick answer
    brain = open_brain()
    opened = Team(brain.cfg)
    team = opened if opened.active() else None  # users added later count from the next start
    if team is None:
        opened.close()
    brain.searcher.embedder.load()  # load the model before the first request

    def ready(url: str) -> None:
        mode = " (read-only)" if read_only else ""
        click.echo(
            f"brainmap serving {url}{mode}: REST + {url}/openapi.json, MCP at {url}/mcp", err=True
        )
        if team is not None:
            click.echo("a team's brain: every request needs a user's token "
                       "(brainmap user list, brainmap token create)", err=True)  # fmt: skip

    run_server(brain, host=host, port=port, token=token, read_only=read_only,
               allow_hosts=list(allow_host), max_body=int(max_body_mb * 1024 * 1024),
               ready=ready, team=team)  # fmt: skip


@cli.command("mcp")
@click.option(
    "--read-only", is_flag=True,
    help="Offer no tool that writes: save, ingest, reindex, git_import, verify, collect, "
    "supersede and map_recompute (the instructions then recommend none of them).",
)  # fmt: skip
def mcp_cmd(read_only: bool) -> None:
    """Serve the tools over MCP on stdin/stdout (for Claude Code and other MCP clients).

    \b
    Example:
      claude mcp add brainmap -- brainmap mcp
    """
    from brainmap.mcp_server import run_stdio

    run_stdio(open_brain(), read_only=read_only)
