"""Architecture rules (DESIGN.md): lower layers never import upper ones; SQL only in the store."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "brainmap"

# Each module may import only modules of a lower (or its own) layer.
LAYERS = {
    "errors": 0, "analysis": 0, "safefile": 0, "termsafe": 0,
    "progress": 0,  # the progress callback type of the long passes
    "keys": 0,  # node keys (kind:name) and entry references (library:path)
    "childprocess": 0,  # how a helper process of ours is started
    "longlived": 0,  # what a server process does once set up (gc.freeze)
    "config": 1, "markdown": 1, "embedders": 1, "websearch": 1, "rerank": 1, "reasoner": 1,
    "expansion": 2,  # the reasoner's query rewrites, for search and the bake-off
    "collectors": 2,  # reads markdown's parse; pairing their observations is facts
    "written": 2,  # ask's written answer: the reasoner's claims, each citing its evidence
    "store": 2, "project": 2,
    "lint": 2,  # the evergreen validator: instruction files in, findings out (no store)
    "embedding": 3, "indexer": 3, "readworker": 3, "search": 3, "graph": 3, "gitlog": 3, "facts": 3,
    "libmap": 3,  # the library map, and routing a search by it
    "ftsquery": 3, "passageworker": 3, "queryvectors": 3, "vectorindex": 3, "fusion": 3,  # search's parts
    "writeworker": 3,  # the server's handle on the child process that runs its note writes
    "sync": 3,  # git sync of a library: commit, merge (union for the diary), push
    "usage": 3,  # usage telemetry: the buffer and usage.db, what stats shows of it
    "team": 3,  # users, roles per library and tokens of a served brain (team.db or PostgreSQL)
    "evaluate": 4, "notes": 4, "audit": 4, "watcher": 4,
    "diary": 4, "hooks": 4,  # the diary writes notes; hooks read the diary
    "derive": 4,  # the one after-change step: pairing, map, rollups (diary)
    "bakeoff": 4,  # compares reasoner models on a labelled set
    "prune": 4,  # unused entries from usage; archiving reindexes (derive)
    "ops": 5,
    "mcp_server": 6, "claude": 6,  # the agents' protocols over ops
    "server": 7,  # serves the MCP tools of mcp_server at /mcp
    "gui": 7,  # the web GUI package (gui/: pages over ops) that server mounts at /
    "cli": 8,  # the click app, its shared helpers and one module per area of commands
    "__main__": 9,
}  # fmt: skip

SQL = re.compile(
    r"\b(SELECT\s+.+\s+FROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|VIRTUAL|TRIGGER)|PRAGMA\s+\w+|BEGIN\s+IMMEDIATE)\b",
    re.DOTALL,  # the project writes SQL keywords in capitals
)


def _modules() -> dict[str, ast.Module]:
    """Top-level module name (a package counts as one module) -> parsed source, per file."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        top = rel.parts[0].removesuffix(".py")
        out[f"{top}:{rel}"] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _top(key: str) -> str:
    return key.split(":", maxsplit=1)[0]


def _imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("brainmap"):
            parts = node.module.split(".")
            if len(parts) > 1:
                names.add(parts[1])
            else:
                names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("brainmap."):
                    names.add(alias.name.split(".")[1])
    return names


def test_every_module_has_a_layer() -> None:
    assert {_top(key) for key in _modules()} - {"__init__"} == set(LAYERS)


def test_lower_layers_never_import_upper_ones() -> None:
    for key, tree in _modules().items():
        name = _top(key)
        if name == "__init__":
            continue
        for imported in _imports(tree) - {"__version__"}:
            assert LAYERS[imported] <= LAYERS[name], f"{key} imports upper-layer {imported}"


def test_sql_only_in_the_store() -> None:
    for key, tree in _modules().items():
        name = _top(key)
        if name == "store":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not SQL.search(node.value), f"SQL in {name}: {node.value[:60]!r}"


def test_the_layer_check_would_catch_sql() -> None:
    assert SQL.search("SELECT id FROM entry") and SQL.search("DELETE FROM chunk WHERE id=?")
    assert SQL.search("PRAGMA user_version") and SQL.search("INSERT OR IGNORE INTO t")
    assert not SQL.search("Select the library you want from the list")


def test_the_lazy_ops_package_exports_every_name_it_declares() -> None:
    from brainmap import ops

    declared = {name for names in ops._EXPORTS.values() for name in names}
    assert set(ops.__all__) == declared
    for name in declared:
        assert getattr(ops, name) is not None
    assert [o.name for o in ops.served()] == [o.name for o in ops.OPS.values() if o.methods]


def test_the_table_order_does_not_depend_on_import_order() -> None:
    code = (
        "import brainmap.ops.agent, brainmap.ops.notes, brainmap.ops.knowledge\n"
        "from brainmap import ops\n"
        "print([o.name for o in ops.served()])\n"
    )
    import subprocess
    import sys

    from brainmap import ops

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str([o.name for o in ops.served()])


# --- imports the layer check must see: relative, importlib, and cycles --------------------------


def _dotted_modules() -> dict[str, Path]:
    """Dotted module name (``brainmap.cli.app``; a package is its ``__init__``) -> file."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["brainmap", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _dynamic_imports(tree: ast.AST) -> list[tuple[ast.Call, str | None]]:
    """Each ``importlib.import_module(...)`` / ``__import__(...)`` call with the module name it
    names: a constant, the constant prefix of an f-string (``brainmap.ops.``), or None."""
    out: list[tuple[ast.Call, str | None]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
            isinstance(func, ast.Name) and func.id in {"import_module", "__import__"}
        )
        if not named:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.append((node, arg.value))
        elif (
            isinstance(arg, ast.JoinedStr)
            and arg.values
            and isinstance(arg.values[0], ast.Constant)
        ):
            out.append((node, str(arg.values[0].value)))
        else:
            out.append((node, None))
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the statements under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return skipped


def _edges(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The brainmap modules ``name`` imports, at module level or inside a function (a lazy
    import that points back is a cycle too), but not under TYPE_CHECKING."""
    skipped = _type_checking_only(tree)
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                targets.add(sub if sub in known else node.module)
        elif isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
    # only the module named: a package that is mid-import when its submodule imports a sibling
    # is already in sys.modules, so ``a.b.c`` does not depend on ``a.b``'s __init__ finishing
    return {target for target in targets if target in known and target != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph`` (as the list of modules around it), or None."""
    state: dict[str, int] = {}  # 1 = on the path, 2 = done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return None


def test_no_relative_imports() -> None:
    for key, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{key}: relative import (use brainmap.<module>)"


def test_dynamic_imports_name_a_lower_or_own_layer() -> None:
    for key, tree in _modules().items():
        for call, target in _dynamic_imports(tree):
            assert target and target.startswith("brainmap."), (
                f"{key}:{call.lineno}: a dynamic import the layer check cannot follow"
            )
            imported = target.split(".")[1]
            assert imported in LAYERS, f"{key}:{call.lineno}: imports unknown {target!r}"
            assert LAYERS[imported] <= LAYERS[_top(key)], f"{key} imports upper-layer {imported}"


def test_no_import_cycles() -> None:
    files = _dotted_modules()
    known = set(files)
    graph = {
        name: _edges(name, ast.parse(path.read_text(encoding="utf-8")), known)
        for name, path in files.items()
    }
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_the_cycle_check_would_catch_one() -> None:
    known = {"brainmap.cli", "brainmap.cli.app", "brainmap.cli.facts"}
    app = ast.parse("from brainmap.cli import facts\n")
    facts = ast.parse("from brainmap.cli.app import _helper\n")
    graph = {
        "brainmap.cli.app": _edges("brainmap.cli.app", app, known),
        "brainmap.cli.facts": _edges("brainmap.cli.facts", facts, known),
    }
    assert _cycle(graph) == ["brainmap.cli.app", "brainmap.cli.facts", "brainmap.cli.app"]
    lazy = ast.parse("def f():\n    from brainmap.cli import facts\n")
    assert _edges("brainmap.cli.app", lazy, known) == {"brainmap.cli.facts"}
    hidden = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import brainmap.cli.facts\n"
    )
    assert _edges("brainmap.cli.app", hidden, known) == set()
    dynamic = ast.parse("import importlib\nimportlib.import_module(name)\n")
    assert _dynamic_imports(dynamic)[0][1] is None


# --- SQL outside the store in any case or built in an f-string --------------------------------

_SQL_START = re.compile(
    r"^\s*(select|insert|update|delete|create|drop|alter|pragma|with|replace|begin)\s",
    re.IGNORECASE,
)


def _parses_as_sql(text: str) -> bool:
    """Whether SQLite's parser accepts ``text`` as a statement: an unknown table or column
    still means it is SQL; a syntax error means it is prose."""
    import apsw

    conn = apsw.Connection(":memory:")
    try:
        conn.execute("EXPLAIN " + text)
    except apsw.SQLError as exc:
        message = str(exc)
        return "syntax error" not in message and "incomplete input" not in message
    except apsw.Error:
        return True
    finally:
        conn.close()
    return True


def _string_texts(tree: ast.AST) -> list[str]:
    """Each string constant, and each f-string with its fields as a placeholder name."""
    inside_fstrings = {
        id(value)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for value in node.values
    }
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append(
                "".join(str(v.value) if isinstance(v, ast.Constant) else "x" for v in node.values)
            )
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in inside_fstrings
        ):
            out.append(node.value)
    return out


def _is_sql(text: str) -> bool:
    return bool(SQL.search(text)) or bool(_SQL_START.match(text) and _parses_as_sql(text))


def test_no_sql_in_any_case_outside_the_store() -> None:
    for key, tree in _modules().items():
        if _top(key) == "store":
            continue
        for text in _string_texts(tree):
            assert not _is_sql(text), f"SQL in {key}: {text[:60]!r}"


def test_the_sql_check_would_catch_lower_case_and_fstrings() -> None:
    assert _is_sql("select id from entry where library_id = ?")
    assert _is_sql("delete from chunk")
    [built] = _string_texts(ast.parse('f"SELECT {cols} FROM {table} WHERE id=?"'))
    assert _is_sql(built)
    [lower] = _string_texts(ast.parse('f"update {table} set n = n + 1"'))
    assert _is_sql(lower)
    assert not _is_sql("Select the library you want from the list")
    assert not _is_sql("update the index after a change")
    assert not _is_sql("with --json, print one object per line")
    assert not _is_sql("Create a library first")


def test_the_gui_reads_only_through_ops() -> None:
    allowed = {"ops", "errors", "keys", "gui", "__version__"}
    for key, tree in _modules().items():
        if _top(key) != "gui":
            continue
        skipped = _type_checking_only(tree)  # annotations may name the types ops return
        for node in ast.walk(tree):
            if id(node) in skipped or not isinstance(node, ast.ImportFrom | ast.Import):
                continue
            for imported in _imports(ast.Module(body=[node], type_ignores=[])):
                assert imported in allowed, f"{key} reads {imported} directly, not through ops"
