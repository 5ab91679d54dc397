"""The read ops the GUI's pages make (not served over HTTP or MCP): an entry's provenance
chain, a library's facts, every map block; and what the knowledge pages read from the served
ops (the stale audit, contradictions, a node's neighbourhood), on real compose samples."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from brainmap import ops
from brainmap.errors import UserError
from conftest import DATA
from knowledge_site import KnowledgeSite, build

pytestmark = pytest.mark.skipif(
    not (DATA / "awesome-compose.tar.gz").exists(), reason="needs ../shared/data"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KnowledgeSite, ops.Brain]]:
    root = tmp_path_factory.mktemp("gui-ops")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(root / "user-home"))
        mp.setenv("BRAINMAP_HOME", str(root / "home"))
        site = build(root)
        with ops.Brain(site.home) as brain:
            yield site, brain


def test_the_gui_reads_are_not_served() -> None:
    served = {o.name for o in ops.served()}
    assert {"hops", "library_facts", "map_blocks"} & served == set()
    assert {"hops", "library_facts", "map_blocks"} <= set(ops.OPS)


def test_hops_of_an_entry(built: tuple[KnowledgeSite, ops.Brain]) -> None:
    site, brain = built
    chain = ops.hops(brain, ops.HopsInput(ref=site.redis_note))
    assert (chain.library, chain.path, chain.file) == (
        "samples", "notes/redis.md", "file:samples/notes/redis.md",
    )  # fmt: skip
    assert chain.source_rev == site.head
    assert chain.commits is not None and [c.sha for c in chain.commits] == [site.head]
    assert chain.commits[0].message == "Add the compose samples and notes"
    assert chain.commits[0].author == "Ada Lovelace"
    assert chain.people is not None
    assert [(p.name, p.email) for p in chain.people] == [("Ada Lovelace", "ada@example.org")]
    by_path = ops.hops(brain, ops.HopsInput(ref="samples:notes/redis.md", depth=2))
    assert by_path.commits == chain.commits and by_path.people is None
    shallow = ops.hops(brain, ops.HopsInput(ref=site.redis_note, depth=1))
    assert shallow.commits is None and shallow.file == chain.file
    with pytest.raises(UserError) as missing:
        ops.hops(brain, ops.HopsInput(ref="samples:notes/nothing.md"))
    assert missing.value.status == 404
    with pytest.raises(ValueError):  # pydantic: depth 1 to 3
        ops.HopsInput(ref=site.redis_note, depth=4)


def test_library_facts_with_filters(built: tuple[KnowledgeSite, ops.Brain]) -> None:
    _, brain = built
    every = ops.library_facts(brain, ops.LibraryFactsInput(library="samples"))
    assert every.library == "samples" and every.total == len(every.facts) > 5
    assert sum(every.predicates.values()) == sum(every.confidence.values()) == every.total
    assert {"publishes", "depends_on", "part_of"} <= set(every.predicates)
    assert list(every.predicates) == sorted(every.predicates)
    web = next(f for f in every.facts if (f.subject, f.predicate, f.object)
               == ("service:flask-redis/web", "publishes", "port:8000"))  # fmt: skip
    assert web.confidence == "confirmed"
    where = {(e.kind, e.path, e.line) for e in web.evidence}
    assert ("config", "flask-redis/compose.yaml", 14) in where
    assert ("narrative", "flask-redis/README.md", 26) in where

    ports = ops.library_facts(brain, ops.LibraryFactsInput(library="samples",
                                                           predicate=["publishes"]))  # fmt: skip
    assert ports.total == every.predicates["publishes"] == len(ports.facts)
    assert {f.predicate for f in ports.facts} == {"publishes"}
    assert ports.predicates == every.predicates  # the filter's choices stay all of them
    lost = ops.library_facts(brain, ops.LibraryFactsInput(library="samples",
                                                          confidence=["contradicted"]))  # fmt: skip
    # the vuejs README says 80 where its compose file says 8080: the README lost
    assert [(f.subject, f.object) for f in lost.facts] == [("service:vuejs/web", "port:80")]
    one = ops.library_facts(brain, ops.LibraryFactsInput(library="samples", limit=1))
    assert len(one.facts) == 1 and one.total == every.total

    later = ops.library_facts(brain, ops.LibraryFactsInput(library="later"))  # not indexed
    assert (later.facts, later.total, later.predicates) == ([], 0, {})
    with pytest.raises(UserError) as unknown:
        ops.library_facts(brain, ops.LibraryFactsInput(library="nowhere"))
    assert unknown.value.status == 404


def test_map_blocks_of_every_library(built: tuple[KnowledgeSite, ops.Brain]) -> None:
    _, brain = built
    found = ops.map_blocks(brain, ops.NoInput())
    assert found.libraries == [lib.name for lib in brain.cfg.libraries]
    assert "samples" in found.libraries and "later" in found.libraries
    blocks = {b.library: b for b in found.blocks}
    assert "later" not in blocks  # added, not indexed: no block
    samples = blocks["samples"]
    assert samples.status == "active" and samples.entries >= 5 and samples.triplet_count > 0
    assert "Redis" in {e.name for e in samples.top_entities}
    assert samples == ops.get_map(brain, ops.MapLibraryInput(library="samples"))


def test_what_the_audit_pages_read(built: tuple[KnowledgeSite, ops.Brain]) -> None:
    site, brain = built
    stale = ops.audit(brain, ops.AuditInput(kind="stale"))
    due = [i for i in stale.items if i.kind == "reverify"]
    assert [(i.library, i.path, i.entry) for i in due] == [
        ("samples", "notes/vue-port.md", site.stale_note)
    ]
    conflicts = ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts
    vue = next(c for c in conflicts if c.subject == "service:vuejs/web")
    assert vue.resolved_by == "authority" and len(vue.sides) == 2
    sides = {s.object: s for s in vue.sides}
    assert sides["port:80"].confidence == "contradicted"
    assert {e.path for e in sides["port:80"].evidence} == {"vuejs/README.md"}
    assert {e.path for e in sides["port:8080"].evidence} == {"vuejs/compose.yaml"}


def test_a_neighbourhood_gives_kinds_depths_and_predicates(
    built: tuple[KnowledgeSite, ops.Brain],
) -> None:
    site, brain = built
    walk = ops.neighbors(brain, ops.NeighborsInput(node="Redis", depth=2))
    assert (walk.center.key, walk.center.kind, walk.center.depth) == ("entity:redis", "entity", 0)
    depth = {n.key: n.depth for n in walk.nodes}
    assert depth[f"entry:{site.redis_note}"] == 1
    assert depth["entity:flask"] == 2  # through the note
    assert {n.kind for n in walk.nodes} >= {"entry", "entity", "tag", "file"}
    assert ("entry:" + site.redis_note, "links_to", "entity:redis") in {
        (e.subject, e.predicate, e.object) for e in walk.edges
    }
    facts = ops.neighbors(brain, ops.NeighborsInput(node="service:flask-redis/web"))
    assert ("publishes", "port:8000", "facts") in {(e.predicate, e.object, e.root)
                                                   for e in facts.edges}  # fmt: skip
