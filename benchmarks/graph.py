"""Knowledge graph at tldr scale: git-import of 5,000 commits, and what --hop 3 adds to a query.
Prints one JSON line.

    python benchmarks/graph.py [--commits 5000] [--queries 200]

A git repository is made (once, cached in ``$BRAINMAP_BENCH_CACHE``; about 10 minutes) from
the 38k tldr pages: one commit with every page, then ``--commits - 1`` commits by five authors,
each editing one to three random pages. The benchmark clones it, times ``git-import`` of the
whole history into a fresh home and an incremental import after ten more commits, then indexes
the pages as text and measures BM25 query latency with ``hop=0`` and ``hop=3`` on the same
queries, interleaved, in one process.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pygit2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, ms, percentile, unpack
from brainmap import ops

AUTHORS = [
    ("Ann Example", "ann@example.org"), ("Bob Builder", "bob@example.org"),
    ("Cy Coder", "cy@example.org"), ("Dee Docs", "dee@example.org"),
    ("Eve Editor", "eve@example.org"),
]  # fmt: skip
T0 = 1_600_000_000


def _commit(repo: pygit2.Repository, who: tuple[str, str], when: int, message: str) -> None:
    sig = pygit2.Signature(who[0], who[1], when, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    repo.create_commit("HEAD", sig, sig, message, repo.index.write_tree(), parents)


def make_repo(pages: Path, commits: int, seed: int = 5) -> Path:
    """A git work tree holding the tldr pages and ``commits`` commits (built once)."""
    target = CACHE / "data" / f"tldr-git-{commits}-{seed}"
    if (target / ".complete").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(pages, target, ignore=shutil.ignore_patterns(".complete"))
    repo = pygit2.init_repository(str(target))
    repo.index.add_all()
    repo.index.write()
    _commit(repo, AUTHORS[0], T0, "import tldr pages")
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*.md"))
    rng = random.Random(seed)
    started = time.monotonic()
    for n in range(1, commits):
        for rel in rng.sample(files, rng.randint(1, 3)):
            with (target / rel).open("a", encoding="utf-8") as handle:
                handle.write(f"\n- Revision {n}: `{rel.rsplit('/', 1)[-1]} --version`\n")
            repo.index.add(rel)
        repo.index.write()
        _commit(repo, rng.choice(AUTHORS), T0 + n * 600, f"pages: revision {n}")
        if n % 500 == 0:
            print(f"repo: {n} commits, {time.monotonic() - started:.0f}s", file=sys.stderr)
    (target / ".complete").touch()
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    data = unpack("tldr-pages.tar.gz")
    origin = make_repo(data, args.commits)
    # a clone, as users have: packed objects, and a work tree the benchmark may commit to
    scratch = Path(tempfile.mkdtemp(prefix="bm-graph-repo-"))
    started = time.perf_counter()
    repo = pygit2.clone_repository(str(origin), str(scratch / "tldr"))
    print(f"clone: {time.perf_counter() - started:.0f}s", file=sys.stderr)
    home = Path(tempfile.mkdtemp(prefix="bm-graph-"))
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="tldr", path=str(scratch / "tldr")))
    result: dict[str, object] = {"benchmark": "graph", "commits_in_repo": args.commits}

    started = time.perf_counter()
    imported = ops.git_import(brain, ops.GitImportInput(libraries=["tldr"])).libraries[0]
    result |= {
        "git_import_s": round(time.perf_counter() - started, 2),
        "git_import_commits": imported.commits,
        "git_import_file_versions": imported.versions,
    }
    print(f"git-import: {result['git_import_s']}s", file=sys.stderr)

    for n in range(10):  # then an incremental import of ten new commits
        page = scratch / "tldr" / "pages" / "common" / "tar.md"
        page.write_text(page.read_text(encoding="utf-8") + f"\nmore {n}\n", encoding="utf-8")
        repo.index.add("pages/common/tar.md")
        repo.index.write()
        _commit(repo, AUTHORS[n % 5], T0 + 10**7 + n, f"incremental {n}")
    started = time.perf_counter()
    more = ops.git_import(brain, ops.GitImportInput(libraries=["tldr"])).libraries[0]
    result["incremental_import_10_commits_s"] = round(time.perf_counter() - started, 3)
    assert more.commits == 10, more

    started = time.perf_counter()
    text = ops.reindex(brain, ops.ReindexInput(libraries=["tldr"], embed=False)).libraries[0]
    result["text_index_s"] = round(time.perf_counter() - started, 2)
    result["pages"] = text.files
    counts = brain.store.counts()
    result |= {"graph_nodes": counts["nodes"], "graph_edges": counts["edges"]}

    rng = random.Random(3)
    words = ["archive", "compress", "list files", "network", "process", "git branch", "docker",
             "disk usage", "permissions", "download", "search text", "install package"]  # fmt: skip
    queries = [rng.choice(words) for _ in range(args.queries)]
    for query in queries[:10]:  # warm up
        ops.search(brain, ops.SearchInput(query=query, mode="bm25", hop=3))
    plain, hopped, hop_only = [], [], []
    from brainmap.graph import GraphReader

    reader = GraphReader(brain.store)
    for query in queries:
        started = time.perf_counter()
        ops.search(brain, ops.SearchInput(query=query, mode="bm25", hop=0))
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        hits = ops.search(brain, ops.SearchInput(query=query, mode="bm25", hop=3)).hits
        hopped.append(time.perf_counter() - started)
        started = time.perf_counter()
        reader.hops([(h.library, h.path, h.source_rev) for h in hits], 3, 3)
        hop_only.append(time.perf_counter() - started)
    assert hits and hits[0].hops is not None and hits[0].hops.people, "hops must find people"
    result |= {
        "hits_per_query": len(hits),
        "bm25_p50_ms": ms(percentile(plain, 0.5)),
        "bm25_hop3_p50_ms": ms(percentile(hopped, 0.5)),
        "hop3_added_p50_ms": ms(percentile(hopped, 0.5) - percentile(plain, 0.5)),
        "hop3_only_p50_ms": ms(percentile(hop_only, 0.5)),
        "hop3_only_p95_ms": ms(percentile(hop_only, 0.95)),
    }
    brain.close()
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
