"""Architecture rules (DESIGN.md): lower layers never import upper ones; SQL only in the store."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "brainmap"

# Each module may import only modules of a lower (or its own) layer.
LAYERS = {
    "errors": 0, "analysis": 0, "safefile": 0, "termsafe": 0,
    "config": 1, "markdown": 1, "embed": 1, "websearch": 1, "rerank": 1, "reasoner": 1,
    "expansion": 2,  # the reasoner's query rewrites, for search and the bake-off
    "collectors": 2,  # reads markdown's parse; pairing their observations is facts
    "written": 2,  # ask's written answer: the reasoner's claims, each citing its evidence
    "store": 2, "project": 2,
    "lint": 2,  # the evergreen validator: instruction files in, findings out (no store)
    "embedding": 3, "indexer": 3, "readworker": 3, "search": 3, "graph": 3, "gitlog": 3, "facts": 3,
    "libmap": 3,
    "sync": 3,  # git sync of a library: commit, merge (union for the diary), push
    "usage": 3,  # usage telemetry: the buffer and usage.db, what stats shows of it
    "evaluate": 4, "notes": 4, "audit": 4, "watcher": 4,
    "diary": 4, "hooks": 4,  # the diary writes notes; hooks read the diary
    "derive": 4,  # the one after-change step: pairing, map, rollups (diary)
    "bakeoff": 4,  # compares reasoner models on a labelled set
    "prune": 4,  # unused entries from usage; archiving reindexes (derive)
    "ops": 5,
    "mcp_server": 6, "claude": 6,  # the agents' protocols over ops
    "server": 7,  # serves the MCP tools of mcp_server at /mcp
    "gui": 7,  # the web GUI that server mounts at /
    "cli": 8, "cli_graph": 8, "cli_health": 8, "cli_facts": 8, "cli_map": 8, "cli_hooks": 8,
    "cli_reasoner": 8, "cli_lint": 8, "cli_complete": 8, "cli_sync": 8,
    "cli_usage": 8,
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
