"""The library map: blocks recomputed on change (only where it changed), bridges, the compact
map in the MCP instructions, routing, and the CLI/HTTP reads. Real files, real SQLite, the
real model, real git repositories and a real MCP client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import httpx
import pygit2

from brainmap import libmap, ops
from brainmap.indexer import index_library
from brainmap.markdown import first_paragraph
from brainmap.mcp_server import create_server, instructions
from brainmap.store import MapBlockRow, VectorCache
from brainmap.store.libmap import HISTORY_KEPT
from conftest import run_cli, serving, write
from test_graph import ANN, T0, commit
from test_mcp import initialize


def _library(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        write(root / rel, text)
    return root


def _brain(home: Path, libraries: dict[str, Path], embed: bool = False) -> ops.Brain:
    brain = ops.Brain(home)
    for name, path in libraries.items():
        ops.library_add(brain, ops.LibraryAddInput(name=name, path=str(path), code=[]))
    ops.reindex(brain, ops.ReindexInput(embed=embed))
    return brain


def _rows(brain: ops.Brain, name: str) -> list[MapBlockRow]:
    return brain.store.maps.blocks([name], history=True)


def _active(brain: ops.Brain, name: str) -> libmap.MapBlock:
    return libmap.blocks(brain.store, [name])[0]


ALPHA = {
    "README.md": "# Alpha\n\n[![ci](https://ci/badge.svg)](https://ci)\n\nAlpha is the **payments** "
    "service: it charges cards and keeps the [ledger](docs/ledger.md).\nIt runs nightly.\n\n"
    "## Setup\n\nRun make.\n",
    "notes/pool.md": "# Connection pool\n\nThe pool talks to [[Postgres]] and [[Redis]].\n",
    "notes/ledger.md": "---\ntags: [ledger, postgres]\n---\n# Ledger\n\nRows in [[Postgres]].\n",
}
BETA = {"README.md": "# Beta\n\nBeta renders the reports.\n", "notes/charts.md": "# Charts\n\nSee [[Vega]].\n"}  # fmt: skip


def test_recompute_keeps_exactly_one_active_block_per_library(home: Path, tmp_path: Path) -> None:
    a = _library(tmp_path / "a", ALPHA)
    b = _library(tmp_path / "b", BETA)
    brain = _brain(home, {"a": a, "b": b})
    for name in ("brain", "a", "b"):
        rows = _rows(brain, name)
        assert [r.status for r in rows] == ["active"]
    block = _active(brain, "a")
    assert block.narrative == (
        "Alpha is the payments service: it charges cards and keeps the ledger. It runs nightly."
    )
    assert block.narrative_source == "README.md"
    # two links and a tag; a title and a tag: the same name is one entity
    assert [(e.name, e.degree) for e in block.top_entities[:3]] == [
        ("Postgres", 3), ("Ledger", 2), ("Alpha", 1)
    ]  # fmt: skip
    assert block.relation_profile == {"links_to": 3, "describes": 3, "tagged": 2}
    assert (block.entries, block.triplet_count) == (3, 11)  # with the 3 from_file edges
    assert block.commit_hash is None and block.bridges == []

    for i in range(HISTORY_KEPT + 3):
        write(a / "notes/pool.md", f"# Connection pool\n\nRevision {i} uses [[Engine {i}]].\n")
        report = ops.reindex(brain, ops.ReindexInput(embed=False))
        assert report.map == ["a"]
        rows = _rows(brain, "a")
        assert [r.status for r in rows].count("active") == 1
        assert rows[0].status == "active" and rows[0].id > rows[1].id  # the newest is active
    assert len(_rows(brain, "a")) == HISTORY_KEPT + 1
    assert len(_rows(brain, "b")) == 1  # never recomputed: nothing in it changed
    assert ops.map_recompute(brain, ops.MapRecomputeInput()).unchanged == ["brain", "a", "b"]
    assert len(_rows(brain, "a")) == HISTORY_KEPT + 1  # same content: no new block
    brain.close()


def test_a_change_in_one_library_recomputes_only_that_one(home: Path, tmp_path: Path) -> None:
    a = _library(tmp_path / "a", ALPHA)
    b = _library(tmp_path / "b", BETA)
    brain = _brain(home, {"a": a, "b": b})
    before = {name: _active(brain, name).id for name in ("brain", "a", "b")}
    assert ops.reindex(brain, ops.ReindexInput(embed=False)).map == []  # nothing changed
    write(b / "notes/new.md", "# Tables\n\nSee [[Arrow]].\n")
    assert ops.reindex(brain, ops.ReindexInput(embed=False)).map == ["b"]
    after = {name: _active(brain, name).id for name in ("brain", "a", "b")}
    assert after["a"] == before["a"] and after["brain"] == before["brain"]
    assert after["b"] > before["b"] and _active(brain, "b").entries == 3
    # save and ingest recompute the library they write to, and only that one
    ops.save(brain, ops.SaveInput(title="Cache warmup", body="Warm [[Redis]] first.",
                                  library="a", force=True))  # fmt: skip
    assert _active(brain, "a").entries == 4 and _active(brain, "b").id == after["b"]
    ops.ingest(brain, ops.IngestInput(text="Seen: reports are slow on Mondays.", library="b"))
    assert _active(brain, "b").entries == 4 and _active(brain, "a").entries == 4
    brain.close()


def test_bridges_appear_and_disappear(home: Path, tmp_path: Path) -> None:
    a = _library(tmp_path / "a", ALPHA)
    b = _library(tmp_path / "b", BETA)
    brain = _brain(home, {"a": a, "b": b})
    assert _active(brain, "a").bridges == [] and _active(brain, "b").bridges == []

    write(b / "notes/store.md", "# Report store\n\nReports live in [[postgres]].\n")
    report = ops.reindex(brain, ops.ReindexInput(libraries=["b"], embed=False))
    assert report.map == ["b", "a"]  # a's bridges changed with b's entities
    bridge = _active(brain, "a").bridges
    assert [(x.name, x.key, x.libraries) for x in bridge] == [
        ("Postgres", "entity:postgres", ["b"])
    ]
    assert _active(brain, "a").bridged_libraries == {"b": 1}
    assert [(x.key, x.libraries) for x in _active(brain, "b").bridges] == [
        ("entity:postgres", ["a"])
    ]
    assert "Bridges to: b." in ops.map_text(brain)

    # an edit that changes no shared entity leaves the partner alone
    write(a / "notes/extra.md", "# Extra\n\nOnly [[Kafka]] here.\n")
    assert ops.reindex(brain, ops.ReindexInput(embed=False)).map == ["a"]

    (b / "notes/store.md").unlink()
    assert ops.reindex(brain, ops.ReindexInput(libraries=["b"], embed=False)).map == ["b", "a"]
    assert _active(brain, "a").bridges == [] and _active(brain, "b").bridges == []

    # a library that goes takes its bridges with it
    write(b / "notes/store.md", "# Report store\n\nReports live in [[Postgres]].\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert _active(brain, "a").bridged_libraries == {"b": 1}
    ops.library_remove(brain, ops.LibraryNameInput(name="b"))
    assert _active(brain, "a").bridges == [] and not brain.store.maps.blocks(["b"], history=True)
    brain.close()


def test_git_head_and_an_interrupted_run_are_caught_up_by_the_next_reindex(
    home: Path, tmp_path: Path
) -> None:
    repo = pygit2.init_repository(str(tmp_path / "repo"))
    first = commit(repo, {"README.md": "# Repo\n\nThe repo library.\n"}, ANN, T0, "first")
    root = Path(repo.workdir)
    brain = _brain(home, {"repo": root})
    assert _active(brain, "repo").commit_hash == first
    # a commit that changes no indexed file still moves HEAD: the block follows
    second = commit(repo, {"script.sh": "echo hi\n"}, ANN, T0 + 60, "second")
    assert ops.reindex(brain, ops.ReindexInput(embed=False)).map == ["repo"]
    assert _active(brain, "repo").commit_hash == second
    # git-import adds history edges: the relation profile shows them
    ops.git_import(brain, ops.GitImportInput(libraries=["repo"]))
    assert _active(brain, "repo").relation_profile["has_version"] == 1
    # the text pass wrote the change but the run stopped before the map (as a crash would)
    write(root / "notes/new.md", "# New\n\nAbout [[Kafka]].\n")
    lib = brain.cfg.library("repo")
    index_library(brain.cfg, brain.store, lib)
    assert "Kafka" not in [e.name for e in _active(brain, "repo").top_entities]
    check = next(c for c in ops.doctor(brain, ops.NoInput()).checks if c.name == "map")
    assert not check.ok and check.items == ["repo"] and check.fix == "brainmap map recompute"
    assert ops.reindex(brain, ops.ReindexInput(embed=False)).map == ["repo"]
    assert "Kafka" in [e.name for e in _active(brain, "repo").top_entities]
    assert next(c for c in ops.doctor(brain, ops.NoInput()).checks if c.name == "map").ok
    brain.close()


def test_narrative_falls_back_to_the_most_central_entry(home: Path, tmp_path: Path) -> None:
    root = _library(tmp_path / "kb", {
        "a.md": "# Kafka\n\n```\ncode first\n```\n\n| a | b |\n\nKafka carries the order events.\n",
        "b.md": "# Consumers\n\nThey read [[Kafka]].\n",
        "c.md": "# Producers\n\nThey write to [[Kafka]].\n",
    })  # fmt: skip
    brain = _brain(home, {"kb": root})
    block = _active(brain, "kb")
    assert block.top_entities[0].name == "Kafka"
    assert (block.narrative_source, block.narrative) == ("a.md", "Kafka carries the order events.")
    brain.close()


def test_first_paragraph_skips_what_is_not_prose() -> None:
    text = (
        "<!-- comment -->\n# Title\n\n> Extract files from **an archive**.\n> More: "
        "<https://x.org>.\n\n- item\n"
    )
    assert first_paragraph([text], 280) == "Extract files from an archive. More: <https://x.org>."
    assert first_paragraph(["# Only a title\n\n```\nx = 1\n```\n", "Second chunk."], 280) == (
        "Second chunk."
    )
    long = first_paragraph(["word " * 200], 50)
    assert len(long) <= 50 and long.endswith("…")
    assert first_paragraph(["## 2024\n\n12345\n"], 280) == ""


def test_instructions_hold_the_map_within_budget_with_200_libraries(
    home: Path, tmp_path: Path
) -> None:
    libraries = {}
    for i in range(200):
        files = {
            f"n{j}.md": f"# Topic {i}-{j}\n\nNotes on [[System {i}]].\n" for j in range(i % 4 + 1)
        }
        files["README.md"] = f"# Library {i}\n\nLibrary {i} holds the runbooks of team {i}. " + (
            "It has a long description that goes on. " * 5
        )
        libraries[f"lib{i:03d}"] = _library(tmp_path / "libs" / f"lib{i:03d}", files)
    brain = _brain(home, libraries)
    budget = brain.cfg.map.instructions_tokens
    text = ops.map_text(brain)
    assert len(text) <= budget * libmap.CHARS_PER_TOKEN
    assert text.startswith("Library map (201 libraries;")
    shown = [line for line in text.splitlines() if line.startswith("- ")]
    assert 20 < len(shown) < 201
    assert text.splitlines()[-1] == (
        f"... and {201 - len(shown)} smaller libraries not shown: call `map` for all of them."
    )
    # the largest libraries (4 notes + README) come first; no line keeps its narrative
    sizes = [int(line.split("(")[1].split(" ")[0]) for line in shown]
    assert sizes[0] == 5 and sizes == sorted(sizes, reverse=True)
    assert all("runbooks" not in line and " Core: " in line for line in shown)
    whole = instructions(brain)
    assert whole.endswith(text) and "`search` first" in whole
    brain.close()

    init = anyio.run(initialize, home)  # a real client of `brainmap mcp`
    assert init.instructions is not None and init.instructions.endswith(text)


def test_compact_map_truncation_rule() -> None:
    def block(name: str, entries: int) -> libmap.MapBlock:
        return libmap.MapBlock(name, f"{name} is about things " * 3, None,
                               [libmap.Entity("Thing", "entity:thing", 2)], {}, [], {"x": 1},
                               entries * 2, entries, entries, None, None)  # fmt: skip

    blocks = [block(f"l{i}", i) for i in range(1, 6)]
    full = libmap.compact(blocks, 10_000)
    assert full.splitlines()[1].startswith("- l5 (5 entries): l5 is about")  # largest first
    assert "Bridges to: x." in full
    short = libmap.compact(blocks, 60)  # 240 chars: no room for narratives
    assert "about" not in short and "- l5 (5 entries) Core: Thing." in short
    assert len(short) <= 240
    tiny = libmap.compact(blocks, 40)  # 160 chars: the smallest go
    assert tiny.splitlines()[-1].startswith("... and ") and len(tiny) <= 160
    assert libmap.compact([], 100).endswith("(no library is indexed yet)")


def test_instructions_follow_the_map_in_each_new_session(home: Path, tmp_path: Path) -> None:
    a = _library(tmp_path / "a", ALPHA)
    brain = _brain(home, {"a": a})
    server = create_server(brain)
    first = server.instructions
    assert "Alpha is the payments service" in first
    assert server.instructions is first  # cached while no block changes
    write(a / "README.md", "# Alpha\n\nAlpha now only keeps the ledger.\n")
    ops.reindex(brain, ops.ReindexInput(embed=False))
    assert "Alpha now only keeps the ledger." in server.instructions
    brain.close()


def test_routing_picks_the_libraries_nearest_the_query(home: Path, tmp_path: Path) -> None:
    topics = {
        "cooking": ["# Pasta\n\nBoil the pasta for nine minutes in salted water.\n",
                    "# Bread\n\nKnead the dough and let it rise overnight.\n"],
        "network": ["# Subnets\n\nA /24 subnet holds 254 usable IPv4 addresses.\n",
                    "# DNS\n\nA records map a host name to an IPv4 address.\n"],
        "stars": ["# Orion\n\nBetelgeuse is the red supergiant in Orion.\n",
                  "# Telescopes\n\nA refractor telescope uses lenses to gather light.\n"],
    }  # fmt: skip
    roots = {
        name: _library(tmp_path / name, {f"{i}.md": t for i, t in enumerate(texts)})
        for name, texts in topics.items()
    }
    brain = _brain(home, roots, embed=False)
    assert not any(b.routable for b in libmap.blocks(brain.store))  # no vectors yet
    brain.cfg.map.route_above, brain.cfg.map.route_libraries = 2, 1
    assert ops.search(brain, ops.SearchInput(query="boil pasta")).routed is None
    # the embedding pass gives the blocks their vectors, without new blocks
    assert ops.reindex(brain, ops.ReindexInput()).map == []
    rows = {r.library: r for r in brain.store.maps.blocks()}
    # routed by its centroid, a library needs no sentence vector (none is embedded); one
    # without chunk vectors is placed by its sentence
    assert rows["cooking"].centroid_n == 2 and rows["cooking"].vec is None
    assert rows["brain"].centroid is None and rows["brain"].vec is not None
    ops.gc(brain, ops.NoInput())  # keeps the sentence's vector in the cache
    cache = VectorCache(brain.cfg.cache_path)
    hashes = [libmap.sentence_hash(b) for b in libmap.blocks(brain.store)]
    assert len(cache.get_many(brain.searcher.model, hashes)) == 1
    cache.close()
    brain.cfg.map.route_above = 8
    assert ops.search(brain, ops.SearchInput(query="boil pasta")).routed is None  # 4 <= 8
    brain.cfg.map.route_above = 2
    routed = ops.search(brain, ops.SearchInput(query="how long should spaghetti cook"))
    assert routed.routed == ["cooking", "brain"]  # brain was empty: always searched
    assert {h.library for h in routed.hits} == {"cooking"}
    everywhere = ops.search(brain, ops.SearchInput(query="how long should spaghetti cook",
                                                   route=False))  # fmt: skip
    assert everywhere.routed is None and len({h.library for h in everywhere.hits}) == 3
    assert ops.search(brain, ops.SearchInput(query="red giant star")).routed == ["stars", "brain"]
    # a library the map cannot place (no block, e.g. after an interrupted upgrade) is
    # always searched
    with brain.store.db.write():
        brain.store.db.conn.execute(
            "DELETE FROM map_block WHERE library_id = (SELECT id FROM library WHERE name = ?)",
            ("network",),
        )
    assert ops.search(brain, ops.SearchInput(query="red giant star")).routed == [
        "stars", "brain", "network"
    ]  # fmt: skip
    ops.map_recompute(brain, ops.MapRecomputeInput(library="network"))
    # a library added since, with no block yet, is searched; once removed, it is not
    (tmp_path / "late").mkdir()  # a folder of its own: the same folder again is refused
    ops.library_add(brain, ops.LibraryAddInput(name="late", path=str(tmp_path / "late")))
    assert "late" in (ops.search(brain, ops.SearchInput(query="red giant star")).routed or [])
    ops.library_remove(brain, ops.LibraryNameInput(name="late"))
    assert ops.search(brain, ops.SearchInput(query="red giant star")).routed == ["stars", "brain"]
    # type, tag or date filters search everywhere
    assert ops.search(brain, ops.SearchInput(query="red giant star", type=["note"])).routed is None
    named = ops.search(brain, ops.SearchInput(query="red giant star", library=["network"]))
    assert named.routed is None and named.hits == [] and named.match == "none"  # nothing close
    named = ops.search(brain, ops.SearchInput(query="ipv4 address", library=["network"]))
    assert named.routed is None and {h.library for h in named.hits} == {"network"}
    assert ops.search(brain, ops.SearchInput(query="pasta", mode="bm25")).routed is None
    brain.close()
    config = home / "config.toml"
    settings = config.read_text().replace("route_above = 8", "route_above = 2")
    config.write_text(settings.replace("route_libraries = 5", "route_libraries = 1"))
    out = run_cli(home, "search", "how many addresses in a subnet")
    assert "searched network, brain (routed by the library map" in out.stderr
    assert "[network]" in out.stdout and "[cooking]" not in out.stdout
    out = run_cli(home, "search", "how many addresses in a subnet", "--no-route")
    assert "routed" not in out.stderr
    with serving(home) as url:  # the GUI says where it looked, and offers everything
        page = httpx.get(f"{url}/ui/search", params={"q": "how many addresses in a subnet"})
        assert "Searched network, brain: the libraries nearest your query" in page.text
        link = "/ui/search?q=how+many+addresses+in+a+subnet&amp;route=off"
        assert f'<a href="{link}">Search every library</a>' in page.text
        everywhere = httpx.get(f"{url}{link.replace('&amp;', '&')}")
        assert everywhere.status_code == 200 and "Searched network" not in everywhere.text


def test_cli_map(home: Path, tmp_path: Path) -> None:
    a = _library(tmp_path / "a", ALPHA)
    b = _library(tmp_path / "b", {**BETA, "notes/db.md": "# DB\n\n[[Postgres]] again.\n"})
    _brain(home, {"a": a, "b": b}).close()
    out = run_cli(home, "map").stdout
    assert "a  3 entries, 11 triplets" in out
    assert "  Alpha is the payments service" in out and "  bridges to: b" in out
    data = json.loads(run_cli(home, "map", "--json").stdout)
    assert [line["library"] for line in data["libraries"]] == ["brain", "a", "b"]
    assert data["text"].startswith("Library map (3 libraries")
    block = json.loads(run_cli(home, "map", "a", "--json").stdout)
    assert block["bridges"] == [{"name": "Postgres", "key": "entity:postgres", "libraries": ["b"]}]
    text = run_cli(home, "map", "a").stdout
    assert "top entities: Postgres (3), Ledger (2), Alpha (1)" in text
    assert "bridge: Postgres -> b" in text
    recomputed = json.loads(run_cli(home, "map", "recompute", "b", "--json").stdout)
    assert recomputed == {"recomputed": [], "unchanged": ["b"], "not_indexed": []}
    assert run_cli(home, "map", "recompute").stdout.startswith("recomputed: none")
    missing = run_cli(home, "map", "nope", check=False)
    assert missing.returncode == 1 and "no library named 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr
    extra = run_cli(home, "map", "a", "b", check=False)
    assert extra.returncode == 2 and "at most one LIBRARY" in extra.stderr
    (tmp_path / "c").mkdir()  # a folder of its own: the same folder again is refused
    run_cli(home, "library", "add", "c", str(tmp_path / "c"))
    assert "c  not indexed yet (brainmap reindex)" in run_cli(home, "map").stdout
    recompute_all = json.loads(run_cli(home, "map", "recompute", "--json").stdout)
    assert recompute_all["not_indexed"] == ["c"]
    unindexed = run_cli(home, "map", "c", check=False)
    assert unindexed.returncode == 1 and "no map block yet" in unindexed.stderr


def test_a_v3_index_gets_the_map_at_the_next_reindex(home: Path, tmp_path: Path) -> None:
    from brainmap.store.schema import connect

    a = _library(tmp_path / "a", ALPHA)
    _brain(home, {"a": a}).close()
    conn = connect(home / "brain.db")  # back to v3: no map_block table (and no v5 to v11)
    conn.execute("ALTER TABLE library DROP COLUMN collectors")
    conn.execute("ALTER TABLE chunk_vec DROP COLUMN parts")
    conn.execute("ALTER TABLE library DROP COLUMN host")
    conn.execute("DROP INDEX entry_language")
    conn.execute("DROP TRIGGER chunk_text_ad")
    conn.execute("DELETE FROM meta WHERE key = 'text_gen'")
    conn.execute("DROP TABLE supersession")
    conn.execute("DROP INDEX entry_inactive")
    for column in ("status", "file_status"):
        conn.execute(f"ALTER TABLE entry DROP COLUMN {column}")
    for event in ("INSERT", "DELETE"):
        trigger = f"chunk_vec_a{event[0].lower()}"
        conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(f"CREATE TRIGGER {trigger} AFTER {event} ON chunk_vec BEGIN "
                     "UPDATE meta SET value = value + 1 WHERE key = 'vec_gen'; END")  # fmt: skip
    conn.execute("DROP TABLE vec_change")
    conn.execute("DELETE FROM meta WHERE key = 'vec_pruned'")
    for table, column in (("entry", "language"), ("library", "analyzer"), ("library", "language")):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.execute("DROP TABLE map_block")
    conn.execute("DELETE FROM meta WHERE key = 'map_gen'")
    conn.execute("DROP INDEX chunk_vec_library")
    conn.execute("PRAGMA user_version=3")
    conn.close()
    brain = ops.Brain(home)
    assert brain.store.maps.blocks() == []
    assert ops.reindex(brain, ops.ReindexInput(embed=False)).map == ["brain", "a"]
    assert _active(brain, "a").narrative_source == "README.md"
    brain.close()


def test_collected_facts_reach_the_map(home: Path, tmp_path: Path) -> None:
    root = _library(tmp_path / "lab", {
        "README.md": "# Lab\n\nThe lab runs the web shop.\n",
        "shop/compose.yaml": "services:\n  web:\n    image: nginx:1.27\n    ports:\n      - '8080:80'\n",
    })  # fmt: skip
    brain = _brain(home, {"lab": root})
    profile = _active(brain, "lab").relation_profile
    assert profile.get("image") == 1 and "service:shop/web" in {
        e.key for e in _active(brain, "lab").top_entities
    }
    ps = write(tmp_path / "ps.json", json.dumps({
        "Names": "shop-web-1", "Image": "nginx:1.27", "Ports": "0.0.0.0:8080->80/tcp",
        "Labels": "com.docker.compose.project=shop,com.docker.compose.service=web",
    }))  # fmt: skip
    before = _active(brain, "lab")
    ops.collect(brain, ops.CollectInput(libraries=["lab"], source=["runtime"], from_file=str(ps)))
    after = _active(brain, "lab")
    assert after.id > before.id and after.triplet_count >= before.triplet_count
    brain.close()


def test_the_map_names_what_a_reader_would_and_each_name_opens_in_neighbors(
    home: Path, tmp_path: Path
) -> None:
    root = _library(tmp_path / "lab", {
        "infra/ssh_config": "Host nas\n  HostName 192.168.1.10\n  User admin\n"
                            "Host backup\n  HostName 192.168.1.10\n",
        "shop/compose.yaml": "services:\n  web:\n    image: nginx\n    depends_on: [db]\n"
                             "  db:\n    image: postgres\n",
        "evil.md": "# ../../etc/evil\n\naGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQgYmFzZTY0IGJhc2U2NA==\n",
        "evil2.md": "# ../../etc/evil\n\nSee [[../../etc/evil]] and [[../../etc/evil]].\n",
    })  # fmt: skip
    brain = _brain(home, {"lab": root})
    block = _active(brain, "lab")
    names = [e.name for e in block.top_entities]
    assert "nas" in names and "shop/web" in names
    # an address, a path-like title and a pasted token are not what the library is about
    assert "192.168.1.10" not in names and not any(".." in n for n in names)
    assert "aGVsbG8" not in block.narrative
    for entity in block.top_entities:  # every name shown opens, with its edges
        walk = ops.neighbors(brain, ops.NeighborsInput(node=entity.name))
        assert walk.center.key == entity.key and walk.edges, entity
    host = ops.neighbors(brain, ops.NeighborsInput(node="nas")).edges
    assert {(e.predicate, e.root) for e in host} >= {("hostname", "facts"), ("user", "facts")}
    brain.close()


def test_partners_follow_shared_entities_even_when_the_block_stays(
    home: Path, tmp_path: Path
) -> None:
    """A shared entity swapped for another that is also shared changes nothing a's block
    shows (no bridges listed, one top entity), but b's bridges to a must follow."""
    a = _library(tmp_path / "a", {"README.md": "# A\n\nLibrary a.\n",
                                  "x.md": "# X\n\n[[Postgres]] and [[Zed]].\n",
                                  "y.md": "# Y\n\n[[Postgres]].\n"})  # fmt: skip
    b = _library(tmp_path / "b", {"z.md": "# Z\n\n[[Postgres]], [[Zed]] and [[Yak]].\n"})
    for path in (*a.rglob("*.md"), *b.rglob("*.md")):
        os.utime(path, ns=(T0 * 10**9, T0 * 10**9))
    brain = _brain(home, {"a": a, "b": b})
    brain.cfg.map.bridges, brain.cfg.map.top_entities = 0, 1
    ops.map_recompute(brain, ops.MapRecomputeInput())
    write(a / "x.md", "# X\n\n[[Postgres]] and [[Yak]].\n")
    os.utime(a / "x.md", ns=(T0 * 10**9, T0 * 10**9))
    index_library(brain.cfg, brain.store, brain.cfg.library("a"), full=True)
    report = libmap.recompute(brain.cfg, brain.store, ["a"], embed=False)
    assert report.recomputed == [] and report.unchanged == ["a", "b"]
    brain.cfg.map.bridges = 12
    block = libmap.recompute(brain.cfg, brain.store, ["b"], embed=False)
    assert block.recomputed == ["b"]
    assert {x.name for x in _active(brain, "b").bridges} == {"Postgres", "Yak"}
    brain.close()


def test_a_block_that_lost_a_race_is_not_stored(home: Path, tmp_path: Path) -> None:
    from brainmap.store import MapVectors, NewBlock

    a = _library(tmp_path / "a", ALPHA)
    brain = _brain(home, {"a": a})
    first = brain.store.maps.blocks(["a"])[0]
    library_id = brain.store.entries.library_ids(["a"])["a"]

    def block(replaces: int) -> NewBlock:
        return NewBlock(library_id, "f", "s", first.block, "2026-01-01T00:00:00+00:00",
                        MapVectors(), "{}", replaces)  # fmt: skip

    assert brain.store.maps.save([block(first.id)], []) == []  # computed against the active one
    assert brain.store.maps.save([block(first.id)], []) == [library_id]  # that one is gone
    assert [r.status for r in _rows(brain, "a")] == ["active", "superseded"]
    brain.close()
