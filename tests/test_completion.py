"""Shell completion (`brainmap completion`), and options accepted after positionals."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from brainmap.cli.complete import BY_NAME, install
from brainmap.cli.main import cli
from conftest import run_cli, write


def _complete(home: Path, line: str, wordbreaks: str | None = None) -> list[str]:
    """What one Tab press at the end of ``line`` offers, through click's bash protocol."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    env = {
        **os.environ,
        "BRAINMAP_HOME": str(home),
        "COMP_WORDS": line,
        "COMP_CWORD": str(cword),
        "_BRAINMAP_COMPLETE": "bash_complete",
    }
    env.pop("_BRAINMAP_WORDBREAKS", None)
    if wordbreaks is not None:
        env["_BRAINMAP_WORDBREAKS"] = wordbreaks
    out = subprocess.run(
        [sys.executable, "-m", "brainmap"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and not out.stderr, out.stderr
    return [line.partition(",")[2] for line in out.stdout.splitlines() if line]


@pytest.fixture
def indexed(home: Path, tmp_path: Path) -> Path:
    """A real home with two libraries, one of them indexed (text only)."""
    docs = tmp_path / "docs"
    write(docs / "setup" / "install.md", "# Install\n\nRun the installer.\n")
    write(docs / "setup" / "upgrade.md", "# Upgrade\n\nRead the changelog first.\n")
    write(docs / "gotchas" / "Pool-Exhaustion.md", "# Pool exhaustion\n\nRaise the pool.\n")
    run_cli(home, "library", "add", "docs", str(docs))
    (tmp_path / "notes").mkdir()
    run_cli(home, "library", "add", "notes", str(tmp_path / "notes"))
    run_cli(home, "reindex", "docs", "--no-embed")
    return home


def test_the_bash_script_loads_in_a_real_bash(home: Path) -> None:
    bash = shutil.which("bash")
    assert bash, "bash is needed for this test"
    script = "source <(brainmap completion bash) && complete -p brainmap"
    env = {**os.environ, "BRAINMAP_HOME": str(home)}
    out = subprocess.run(
        [bash, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "-F _brainmap_completion brainmap" in out.stdout


def test_zsh_and_fish_scripts(home: Path) -> None:
    assert run_cli(home, "completion", "zsh").stdout.startswith("#compdef brainmap")
    assert "complete --no-files --command brainmap" in run_cli(home, "completion", "fish").stdout
    bad = run_cli(home, "completion", "tcsh", check=False)
    assert bad.returncode == 2 and "tcsh" in bad.stderr


def test_commands_options_and_library_names(indexed: Path) -> None:
    assert _complete(indexed, "brainmap sea") == ["search"]
    assert _complete(indexed, "brainmap library remove ") == ["brain", "docs", "notes"]
    assert _complete(indexed, "brainmap library remove n") == ["notes"]
    assert _complete(indexed, "brainmap search pool -l d") == ["docs"]
    assert _complete(indexed, "brainmap reindex docs --f") == ["--full"]
    assert _complete(indexed, "brainmap map ") == ["recompute", "brain", "docs", "notes"]
    assert "version" in _complete(indexed, "brainmap lint -r v")
    # another home, given as --home, has other libraries
    other = indexed.parent / "other-home"
    (indexed.parent / "x").mkdir()
    run_cli(other, "library", "add", "elsewhere", str(indexed.parent / "x"))
    assert _complete(indexed, f"brainmap --home {other} library remove e") == ["elsewhere"]


def test_entries_and_slugs_come_from_the_index(indexed: Path) -> None:
    assert _complete(indexed, "brainmap get setup/") == ["setup/install.md", "setup/upgrade.md"]
    assert _complete(indexed, "brainmap get docs:setup/u") == ["docs:setup/upgrade.md"]
    assert _complete(indexed, "brainmap verify docs:g") == ["docs:gotchas/Pool-Exhaustion.md"]
    assert _complete(indexed, "brainmap backlinks pool") == ["pool-exhaustion"]
    # bash splits docs:setup/u at the colon and replaces what follows it
    split = _complete(indexed, "brainmap get docs : setup/u", wordbreaks=" \t\n\"'><=;|&(:")
    assert split == ["setup/upgrade.md"]
    assert _complete(indexed, "brainmap get docs :", wordbreaks=":") == [
        "gotchas/Pool-Exhaustion.md", "setup/install.md", "setup/upgrade.md",
    ]  # fmt: skip
    # a real bash, its COMP_WORDBREAKS and the script's function
    script = (
        "source <(brainmap completion bash); COMP_WORDS=(brainmap get docs : setup/i); "
        'COMP_CWORD=4; _brainmap_completion brainmap; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {**os.environ, "BRAINMAP_HOME": str(indexed)}
    out = subprocess.run(
        ["bash", "-c", script], check=False, env=env, capture_output=True, text=True
    )
    assert out.stdout.split() == ["setup/install.md"], out.stderr


def test_no_index_no_config_nothing_offered_and_nothing_created(tmp_path: Path) -> None:
    home = tmp_path / "none"
    assert _complete(home, "brainmap get ") == []
    assert _complete(home, "brainmap library remove ") == []
    write(home / "config.toml", "not [valid toml")
    assert _complete(home, "brainmap library remove ") == []
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]


def test_every_library_parameter_completes() -> None:
    install(cli)

    def walk(group: click.Group) -> list[click.Command]:
        out: list[click.Command] = []
        for command in group.commands.values():
            out += walk(command) if isinstance(command, click.Group) else [command]
        return out

    named = [p for c in walk(cli) for p in c.params if p.name in BY_NAME]
    assert len(named) >= 8
    assert all(p._custom_shell_complete is not None for p in named)


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += _leaves(command, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("path", _leaves(cli), ids=" ".join)
def test_options_may_follow_positionals(path: tuple[str, ...]) -> None:
    """`brainmap CMD ARG --flag` parses the flag (here --help, which stops before running)."""
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    values = [
        p.type.choices[0] if isinstance(p.type, click.Choice) else "x"
        for p in command.params
        if isinstance(p, click.Argument)
    ]
    result = CliRunner().invoke(cli, [*path, *values, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output, result.output


def test_a_flag_after_the_argument_in_a_real_process(indexed: Path) -> None:
    got = run_cli(indexed, "get", "setup/install.md", "--json").stdout
    assert '"title": "Install"' in got
    removed = run_cli(indexed, "library", "remove", "notes", "--json").stdout
    assert '"name": "notes"' in removed or "notes" in removed
