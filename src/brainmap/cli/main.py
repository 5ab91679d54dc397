"""The entry of the ``brainmap`` command (``brainmap.__main__`` calls :func:`main`).

Importing an area module registers its commands on the group of :mod:`brainmap.cli.app`;
this module imports every area, and nothing else does: the areas never import each other.
"""

from __future__ import annotations

import sys

from brainmap.cli import (  # noqa: F401
    complete,
    facts,
    graph,
    health,
    hooks,
    index,
    library,
    lint,
    map,
    notes,
    reasoner,
    search,
    serve,
    sync,
    team,
    usage,
)
from brainmap.cli.app import cli, state
from brainmap.cli.common import fail
from brainmap.errors import UserError

__all__ = ["cli", "main"]


def main() -> None:
    """Console-script entry point: user errors become a message and exit status 1."""
    from brainmap import termsafe

    termsafe.install()  # what files hold is shown on the terminal, never obeyed by it
    try:
        cli.main(prog_name="brainmap")
    except UserError as exc:
        fail(exc.message, exc.hint)
    except Exception as exc:
        if not _lost_database(exc):
            raise
        fail(
            f"lost the connection to PostgreSQL: {str(exc).strip().splitlines()[0]}",
            "run the command again; what was not committed was not written",
        )
    finally:
        if state.brain is not None:
            state.brain.close()


def _lost_database(exc: Exception) -> bool:
    """Whether ``exc`` is a PostgreSQL connection that failed mid-command (psycopg is only
    loaded when the index is on PostgreSQL)."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.OperationalError)
