"""The ``brainmap`` click group, its global options and the state its commands share.

The area modules of this package register their commands on :data:`cli`;
:mod:`brainmap.cli.main` imports them all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from brainmap import __version__

if TYPE_CHECKING:
    from brainmap.ops import Brain

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class State:
    """What the global options set, and the brain once a command opened it."""

    home: Path | None = None
    brain: Brain | None = None


state = State()


@click.group(context_settings=CONTEXT)
@click.option(
    "--home",
    # the home checks itself (config.ensure_home): one message for --home and $BRAINMAP_HOME
    type=click.Path(path_type=Path),
    help="Home folder (config.toml, brain.db). Default: $BRAINMAP_HOME or ~/.brainmap.",
)
@click.option(
    "--db",
    metavar="URL",
    help="The index in a PostgreSQL database a team shares (postgresql://...), instead of "
    "brain.db in the home. Default: $BRAINMAP_DB, else [store] url.",
)
@click.version_option(__version__, prog_name="brainmap")
def cli(home: Path | None, db: str | None) -> None:
    """brainmap: markdown libraries -> one SQLite index -> hybrid search, fully offline.

    \b
    Start:
      brainmap library add docs ./documentation
      brainmap reindex
      brainmap search "how do I rotate the keys"
    """
    state.home = home
    if db is not None:
        if not db.startswith(("postgresql://", "postgres://")):
            raise click.BadParameter("must be a postgresql:// URL", param_hint="--db")
        os.environ["BRAINMAP_DB"] = db  # the children this process starts use it too
