"""CLI command of the evergreen validator: ``brainmap lint [FILE...]``.

Registered on the ``brainmap`` group by :mod:`brainmap.cli.main`. CLI-only (no op): it reads files
of the working tree, not the brain, and the logic is :mod:`brainmap.lint`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from brainmap.cli.app import cli, state
from brainmap.cli.common import echo_json, fail, json_option
from brainmap.termsafe import one_line


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return os.path.relpath(path) if path.absolute().is_relative_to(Path.cwd()) else str(path)
    except ValueError:  # another drive (Windows)
        return str(path)


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--rule", "-r", "rules", multiple=True,
    help="Check only this rule (repeatable). Default: the [lint] rules of config.toml (all).",
)  # fmt: skip
@json_option
def lint(files: tuple[Path, ...], rules: tuple[str, ...], json_out: bool) -> None:
    """Flag volatile content in agent instruction files: line numbers, counts, test counts,
    percentages, dated claims, versions in prose, home paths, long pasted code or logs, and
    files over the size budget. State the rule, not the figure.

    Without FILE: the project's CLAUDE.md, AGENTS.md, GEMINI.md and files under
    .cursor/rules (from the root of the git repository holding the working directory; the
    [lint] files setting). A folder stands for the files under it. A line ending in
    `<!-- brainmap: allow -->` (or `<!-- brainmap: allow RULE -->`) is left alone; on a
    fence line it covers the block. Exit status 1 when something is found, 2 for a usage
    error.

    \b
    Examples:
      brainmap lint
      brainmap lint CLAUDE.md docs/AGENTS.md --json
      brainmap lint -r line-ref -r version .cursor/rules
    """
    from dataclasses import replace

    from brainmap import config
    from brainmap import lint as lint_mod
    from brainmap.project import git_root

    settings = config.load(config.resolve_home(state.home)).lint
    unknown = [rule for rule in rules if rule not in config.LINT_RULES]
    if unknown:
        fail(f"unknown rule {unknown[0]!r}", f"rules: {', '.join(config.LINT_RULES)}", code=2)
    if rules:
        settings = replace(settings, rules=list(rules))
    if files:
        missing = [path for path in files if not path.exists()]
        if missing:
            fail(f"no such file: {missing[0]}", "give existing files or folders", code=2)
        targets = lint_mod.expand(files)
        root = None
    else:
        root = git_root(Path.cwd()) or Path.cwd()
        targets = lint_mod.default_files(root, settings.files)
    findings = []
    for path in targets:
        try:
            findings += lint_mod.lint_file(path, settings, _shown(path))
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror or exc}", code=2)
    if json_out:
        doc = {
            "root": str(root) if root else None,
            "files": [_shown(path) for path in targets],
            "rules": settings.rules,
            "count": len(findings),
            "findings": [f.to_dict() for f in findings],
        }
        echo_json(doc)
    elif not targets:
        where = root or Path.cwd()
        click.echo(f"nothing to lint: no {', '.join(settings.files)} in {where}")
    else:
        for f in findings:
            click.echo(f"{one_line(f.file)}:{f.line}: {f.rule}: {f.message}: {one_line(f.text)}")
            click.echo(f"  {f.suggestion}")
        files_word = "file" if len(targets) == 1 else "files"
        if findings:
            click.echo(f"{len(findings)} finding(s) in {len(targets)} {files_word}", err=True)
        else:
            click.echo(f"{len(targets)} {files_word}: nothing volatile")
    sys.exit(1 if findings else 0)
