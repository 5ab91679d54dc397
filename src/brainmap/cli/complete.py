"""Shell completion: ``brainmap completion bash|zsh|fish`` and what a Tab press offers.

click does the work (``_BRAINMAP_COMPLETE=bash_complete brainmap`` answers one Tab press);
this module prints click's script and gives parameters their values: library names from the
home's config.toml, entry paths and slugs from the index (bounded prefix queries of
:mod:`brainmap.store.complete`). Parameters are found by name, so a new command's
``library``/``libraries``/``ref``/``slug`` parameter completes without a line here.

The completers are installed when a Tab press is answered (by the shell classes below), so
the order in which :mod:`brainmap.cli.main` imports the command modules does not matter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    FishComplete,
    ShellComplete,
    ZshComplete,
    add_completion_class,
)

from brainmap.cli.app import cli

SHELLS = ("bash", "zsh", "fish")
_LIMIT = 50  # values offered per Tab press


def _home(ctx: click.Context) -> Path:
    from brainmap.config import resolve_home

    return resolve_home(ctx.find_root().params.get("home"))


def complete_libraries(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """The configured libraries whose names start with ``incomplete``."""
    from brainmap.config import load

    try:
        names = [lib.name for lib in load(_home(ctx)).libraries]
    except Exception:  # a broken config: nothing to offer (the command itself will say why)
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def complete_entries(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Indexed entries: paths, or ``library:path`` once a colon is typed."""
    from brainmap.store.complete import entry_refs

    try:
        refs = entry_refs(_home(ctx) / "brain.db", incomplete, _LIMIT)
    except Exception:  # busy, damaged, unreadable: a Tab press never shows a traceback
        return []
    return [CompletionItem(ref) for ref in refs]


def complete_slugs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Entry slugs (what ``Brain: slug`` comments name)."""
    from brainmap.store.complete import entry_slugs

    try:
        slugs = entry_slugs(_home(ctx) / "brain.db", incomplete, _LIMIT)
    except Exception:
        return []
    return [CompletionItem(slug) for slug in slugs]


def _complete_map(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    first = not ctx.params.get("args") and "recompute".startswith(incomplete)
    return [CompletionItem("recompute")] * first + complete_libraries(ctx, param, incomplete)


def _complete_rules(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    from brainmap.config import LINT_RULES

    return [CompletionItem(rule) for rule in LINT_RULES if rule.startswith(incomplete)]


Completer = Callable[[click.Context, click.Parameter, str], list[Any]]
# parameters completed by name, wherever they are; (command path, parameter) for the others
BY_NAME: dict[str, Completer] = {
    "library": complete_libraries,
    "libraries": complete_libraries,
    "ref": complete_entries,
    "slug": complete_slugs,
}
BY_COMMAND: dict[tuple[str, str], Completer] = {
    ("library remove", "name"): complete_libraries,
    ("map", "args"): _complete_map,
    ("lint", "rules"): _complete_rules,
}


def _walk(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        out.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            out += _walk(command, f"{prefix}{name} ")
    return out


def install(group: click.Group) -> None:
    """Give every parameter of the tables its completer (click's ``shell_complete=``)."""
    for path, command in _walk(group):
        for param in command.params:
            completer = BY_COMMAND.get((path, param.name or "")) or BY_NAME.get(param.name or "")
            if completer is not None and param._custom_shell_complete is None:
                param._custom_shell_complete = completer


class _Installing(ShellComplete):
    """Installs the completers before it answers."""

    def get_completions(self, args: list[str], incomplete: str) -> list[CompletionItem]:
        if isinstance(self.cli, click.Group):
            install(self.cli)
        return super().get_completions(args, incomplete)


class _Zsh(_Installing, ZshComplete):
    pass


class _Fish(_Installing, FishComplete):
    pass


class _Bash(_Installing, BashComplete):
    """click's bash completion, with values holding a colon (``docs:setup.md``).

    bash splits the words at each character of ``COMP_WORDBREAKS``, which holds ``:`` by
    default: ``docs:se`` arrives as ``docs``, ``:``, ``se``, and bash replaces only what
    follows the colon. The script passes ``COMP_WORDBREAKS`` along; when it holds a colon
    the words are joined back and each value is given from after the last colon.
    """

    source_template = BashComplete.source_template.replace(
        "COMP_CWORD=$COMP_CWORD", 'COMP_CWORD=$COMP_CWORD _BRAINMAP_WORDBREAKS="$COMP_WORDBREAKS"'
    )
    _trim = ""

    def get_completion_args(self) -> tuple[list[str], str]:
        args, incomplete = super().get_completion_args()
        if ":" not in os.environ.get("_BRAINMAP_WORDBREAKS", ""):
            return args, incomplete
        words = [*args, incomplete]
        joined: list[str] = []
        for i, word in enumerate(words):
            new_word = i == len(words) - 1 and not word  # typed after a space: stays apart
            if joined and (word == ":" or (joined[-1].endswith(":") and not new_word)):
                joined[-1] += word
            else:
                joined.append(word)
        incomplete = joined[-1]
        if ":" in incomplete:
            self._trim = incomplete[: incomplete.rindex(":") + 1]
        return joined[:-1], incomplete

    def format_completion(self, item: CompletionItem) -> str:
        if self._trim and item.value.startswith(self._trim):
            item = CompletionItem(item.value[len(self._trim) :], type=item.type, help=item.help)
        return super().format_completion(item)


for _shell in (_Bash, _Zsh, _Fish):
    add_completion_class(_shell)


@cli.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script of SHELL (bash, zsh or fish): commands, options, library
    names from config.toml, entry paths and slugs from the index.

    \b
    Examples:
      brainmap completion bash > ~/.local/share/bash-completion/completions/brainmap
      brainmap completion zsh > ~/.zfunc/_brainmap    # with fpath+=(~/.zfunc) before compinit
      brainmap completion fish > ~/.config/fish/completions/brainmap.fish
      eval "$(brainmap completion bash)"               # this shell only
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # the Choice allows only shells click knows
    click.echo(cls(cli, {}, "brainmap", "_BRAINMAP_COMPLETE").source(), nl=False)
