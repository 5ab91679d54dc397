"""`brainmap lint`: volatile content in agent instruction files, and nothing in good ones."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from brainmap import config
from brainmap.config import LINT_RULES, LintSettings
from brainmap.errors import UserError
from brainmap.lint import RULES, lint_text
from conftest import ROOT, run_cli, write

# A realistic CLAUDE.md: rules, commands, bounds and minimums, but no figure that rots.
CLEAN = """\
# CLAUDE.md

Guidance for agents working in this repository.

## Commands
- Run `pytest -q` before committing; `ruff check` and `ruff format` must be clean.
- Run one test file with `python -m pytest -q tests/test_cli.py`.
- Install with `pip install -e '.[test]'`; pin tools as `ruff==0.6.9` in requirements.
- Use Python 3.11+ (see `requires-python` in pyproject.toml); Node 20 or later for the GUI.
- Requires at least version 2.4 of the protocol.

## Rules
- Keep modules under 700 lines and functions under 50 lines.
- Coverage must stay above 90%; CI fails under 85%.
- 100% of public functions have Google-style docstrings.
- Read the first 20 lines of a log before the rest.
- Write 2 tests for every bug you fix; split a change touching more than 10 files.
- Never hard-code paths: use `~/.config/app`, `$HOME` or paths relative to the repo root.
- The dev server listens on 127.0.0.1:8765; the API is api.example.com:443.
- Dates are ISO 8601 (YYYY-MM-DD) and timestamps UTC; log at ERROR only what a user must fix.
- Errors go through `UserError`; never print a traceback for a user mistake.
- See https://docs.python.org/3.11/library/re.html#re.VERBOSE for regex syntax.

## Layout
```
src/app/
  cli.py      the command line
  store.py    SQL lives here only
```

```bash
python -m pytest -q tests/test_cli.py
export PATH=$HOME/.local/bin:$PATH
```
"""


def _planted() -> tuple[str, list[tuple[int, str]]]:
    """A file with one instance of each volatile kind, and the (line, rule) pairs expected."""
    lines = ["# AGENTS.md", ""]
    expected: list[tuple[int, str]] = []

    def add(text: str, *rules: str) -> None:
        lines.append(text)
        expected.extend((len(lines), rule) for rule in rules)

    add("The retry loop lives in `src/app/retry.py:123`.", "line-ref")
    add("See line 42 of the settings for the timeout.", "line-ref")
    add("The codebase has 1,234 lines.", "count")
    add("The repository holds 42 files.", "count")
    add("All 598 tests must pass.", "test-count")
    add("The last run: 598 passed.", "test-count")
    add("Coverage is at 87% coverage.", "percent")
    add("As of 2026-01 the deploy runs on Fridays.", "dated")
    add("We ship the client v1.2.3 to users.", "version")
    add("The parser is version 3.11 now.", "version")
    add("Secrets are in /home/alice/secrets/app.env.", "home-path")
    add("On the Mac: /Users/bob/Library/app.plist.", "home-path")
    add(r"On Windows: C:\Users\bob\AppData\app.ini.", "home-path")
    add("Currently (2025) the API is read-only.", "dated")
    add("As of March 2026 we deploy twice a week.", "dated")
    add("")
    add("```python", "long-code")
    for i in range(35):
        add(f"x{i} = {i}")
    add("```")
    add("")
    add("Traceback (most recent call last):", "log")
    add('  File "app.py", line 10, in <module>')
    add("    main()")
    add("ValueError: boom")
    add("")
    add("2026-01-05 12:00:01 INFO starting", "log")
    add("2026-01-05 12:00:02 ERROR failed to bind")
    add("2026-01-05 12:00:03 INFO retrying")
    add("")
    add("The cache holds 87% of reads. <!-- brainmap: allow -->")
    add("It has 42 files and 87% hits. <!-- brainmap: allow percent -->", "count")
    return "\n".join(lines) + "\n", expected


def test_a_clean_instruction_file_has_no_findings() -> None:
    assert lint_text(CLEAN) == []


def test_each_volatile_kind_is_flagged_on_its_line() -> None:
    text, expected = _planted()
    found = lint_text(text, file="AGENTS.md")
    assert [(f.line, f.rule) for f in found] == expected
    assert {f.file for f in found} == {"AGENTS.md"}
    assert {rule for _, rule in expected} == set(LINT_RULES) - {"size"}
    by_rule = {f.rule: f for f in reversed(found)}  # the first of each rule
    assert by_rule["line-ref"].text == "src/app/retry.py:123"
    assert by_rule["home-path"].text == "/home/alice/secrets/app.env"  # no final full stop
    assert "35 lines" in by_rule["long-code"].message
    assert all(f.suggestion for f in found)
    assert "brainmap save" in by_rule["log"].suggestion


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("see app.py:10-20", "line-ref"),
        ("https://github.com/o/r/blob/main/a.py#L42", "line-ref"),
        ("read lines 10-20 first", "line-ref"),
        ("about 12,000 lines of code", "count"),
        ("12 passed, 1 failed", "test-count"),
        ("coverage 91%", "percent"),
        ("last updated: 2026-03-01", "dated"),
        ("as of today the job is manual", "dated"),
        ("built with `v2.0.1`", "version"),
        ("file:///home/carol/notes.md", "home-path"),
    ],
)
def test_more_forms(text: str, rule: str) -> None:
    assert {f.rule for f in lint_text(text)} == {rule}, text


@pytest.mark.parametrize(
    "text",
    [
        "Use Python 3.11+.",  # a minimum is a rule
        "Needs libfoo 1.2.0 or later.",
        "Pin with `pip install httpx==0.27.0`.",  # a command's version is what it runs
        "Keep the file below 300 lines; modules ideally under ~700 lines.",
        "Run `sed -n 10,20p file` to read a range.",
        "Listen on 10.0.0.12 or ::1.",
        "Run the 3 tests in tests/test_x.py first.",
        "Fail the build when coverage is less than 80 %.",
        "~/projects/app and $HOME/bin are fine.",
    ],
)
def test_rules_are_not_figures(text: str) -> None:
    assert lint_text(text) == [], text


def test_an_allow_on_a_fence_line_covers_its_block() -> None:
    block = "\n".join(f"cp /home/alice/f{i} ." for i in range(40))
    text = f"```bash <!-- brainmap: allow -->\n{block}\n```\n"
    assert lint_text(text) == []
    only_long = f"```bash <!-- brainmap: allow long-code -->\n{block}\n```\n"
    assert {f.rule for f in lint_text(only_long)} == {"home-path"}
    # prose rules never look inside fenced code: a version or a line number there is code
    assert lint_text("```\npip install foo==1.2.3 # line 42 of 598 tests\n```\n") == []


def test_budgets_and_rules_come_from_the_settings() -> None:
    long = "\n".join(f"- rule {i}" for i in range(50)) + "\n"
    small = LintSettings(max_lines=40, max_bytes=10_000)
    (size,) = lint_text(long, small)
    assert (size.line, size.rule) == (1, "size") and size.text.startswith("50 lines")
    assert "budget (40 lines" in size.message
    assert lint_text(long, LintSettings(max_bytes=100))[0].rule == "size"
    code = "```\n" + "x\n" * 12 + "```\n"
    assert lint_text(code) == []
    assert [f.rule for f in lint_text(code, LintSettings(max_code_lines=10))] == ["long-code"]
    planted, _ = _planted()
    only = lint_text(planted, LintSettings(rules=["version", "dated"]))
    assert {f.rule for f in only} == {"version", "dated"}


def test_the_lint_section_of_config_toml(tmp_path: Path) -> None:
    home = tmp_path / "h"
    write(home / "config.toml", '[lint]\nrules = ["line-ref", "log"]\nmax_code_lines = 12\n')
    cfg = config.load(home)
    assert cfg.lint.rules == ["line-ref", "log"] and cfg.lint.max_code_lines == 12
    assert cfg.lint.max_lines == LintSettings().max_lines
    assert config.load(home).lint == config.load(home).lint
    config.save(cfg)
    assert "[lint]" in (home / "config.toml").read_text() and config.load(home).lint == cfg.lint
    for bad, says in (
        ('rules = ["nope"]', "unknown rule"),
        ("max_code_lines = 0", "out of range"),
        ("max_bytes = true", "must be a number"),
        ("colour = 1", "unknown setting"),
    ):
        write(home / "config.toml", f"[lint]\n{bad}\n")
        with pytest.raises(UserError, match=says):
            config.load(home)


def test_every_rule_has_a_description_and_a_suggestion() -> None:
    assert tuple(RULES) == LINT_RULES
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if "brainmap lint" in readme:  # the README's rules table names every rule
        for rule in LINT_RULES:
            assert f"`{rule}`" in readme, rule


def test_the_command_finds_the_project_files_and_exits_by_findings(
    home: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    write(repo / "CLAUDE.md", CLEAN)
    planted, expected = _planted()
    write(repo / ".cursor" / "rules" / "style.mdc", planted)
    write(repo / "README.md", "598 tests as of 2026-01\n")  # not an instruction file
    inside = repo / "src" / "deep"
    inside.mkdir(parents=True)
    out = run_cli(home, "lint", "--json", cwd=inside, check=False)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert Path(doc["root"]) == repo.resolve()
    assert [Path(f).name for f in doc["files"]] == ["CLAUDE.md", "style.mdc"]
    assert doc["count"] == len(expected) == len(doc["findings"])
    assert {Path(f["file"]).name for f in doc["findings"]} == {"style.mdc"}
    assert [(f["line"], f["rule"]) for f in doc["findings"]] == expected
    human = run_cli(home, "lint", cwd=repo, check=False)
    assert human.returncode == 1
    assert re.search(r"^\.cursor/rules/style\.mdc:3: line-ref: .*retry\.py:123", human.stdout, re.M)
    assert "brainmap save" in human.stdout and "finding(s) in 2 files" in human.stderr
    clean = run_cli(home, "lint", "CLAUDE.md", cwd=repo)
    assert clean.returncode == 0 and "nothing volatile" in clean.stdout
    only = run_cli(
        home, "lint", ".cursor/rules", "--rule", "version", "--json", cwd=repo, check=False
    )
    assert {f["rule"] for f in json.loads(only.stdout)["findings"]} == {"version"}
    assert not home.exists()  # linting reads the home's config; it creates nothing


def test_usage_errors_exit_2_with_a_message(home: Path, tmp_path: Path) -> None:
    missing = run_cli(home, "lint", str(tmp_path / "CLAUDE.md"), check=False)
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = run_cli(home, "lint", "-r", "bogus", check=False, cwd=tmp_path)
    assert bad.returncode == 2 and "line-ref" in bad.stderr
    empty = run_cli(home, "lint", cwd=tmp_path)
    assert empty.returncode == 0 and "nothing to lint" in empty.stdout


def test_the_pre_commit_hook_manifest() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "brainmap-lint" and hook["entry"] == "brainmap lint"
    assert hook["language"] == "python"
    files = re.compile(hook["files"])
    for path in ("CLAUDE.md", "pkg/AGENTS.md", "GEMINI.md", ".cursor/rules/python.mdc"):
        assert files.search(path), path
    for path in ("README.md", "docs/CLAUDE.md.bak", "MYCLAUDE.md"):
        assert not files.search(path), path
