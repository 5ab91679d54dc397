"""A home for the knowledge pages and their ops: real compose samples (awesome-compose's
flask-redis and vuejs, whose README disagrees with its compose file) collected into facts,
notes linking entities, one due for re-verification, a hostile note and a hostile compose
file, all under git with its history imported."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import pygit2

from brainmap import ops
from conftest import DATA, write
from gui_fixtures import commit_all

SAMPLES = ("flask-redis", "vuejs")
XSS = '<script>alert(1)</script> "><img src=x onerror=alert(1)>'
XSS_ENTITY = "<b>Redis</b><script>alert(2)</script>"  # a wiki link's name, so an entity
XSS_SERVICE = "<img src=x onerror=alert(3)>"
RAW_TAGS = ("<script>alert(", "<img src=x", '"><img', "<b>Redis</b>", "<i>x</i>")


@dataclass
class KnowledgeSite:
    home: Path
    root: Path
    redis_note: str  # entry ids
    stale_note: str
    xss_note: str
    head: str  # the commit the samples library is at


def build(root: Path) -> KnowledgeSite:
    """The library ``samples`` (indexed, collected, git history imported) and the library
    ``later`` (added, not indexed)."""
    lib = root / "samples"
    with tarfile.open(DATA / "awesome-compose.tar.gz") as tar:
        members = [m for m in tar.getmembers() if Path(m.name).parts[:1] in [(s,) for s in SAMPLES]]
        tar.extractall(lib, members=members, filter="data")
    write(
        lib / "notes" / "redis.md",
        "---\ntitle: Redis for the flask app\ntags: [cache]\n---\n# Redis for the flask app\n\n"
        "The web service of flask-redis keeps its hit counter in [[Redis]].\n\n## Keys\n\n"
        "Watch the keys with redis-cli monitor; [[Redis]] runs beside [[Flask]].\n",
    )
    write(
        lib / "notes" / "vue-port.md",
        "---\ntitle: Vue dev server port\nlast_verified: 2020-01-02\n---\n# Vue dev server port\n\n"
        "The [[Vue]] dev server of the vuejs sample listens on 8080 inside its container.\n",
    )
    write(
        lib / "notes" / "xss.md",
        f"---\ntitle: '{XSS}'\ntags: ['<i>x</i>']\n---\n# {XSS}\n\n"
        f"Payload {XSS} beside [[{XSS_ENTITY}]] and [[Redis]].\n",
    )
    write(
        lib / "hostile" / "compose.yaml",  # facts whose names are markup
        f"services:\n  '{XSS_SERVICE}':\n    image: '<script>alert(4)</script>'\n"
        "    ports:\n      - '9999:80'\n",
    )
    write(root / "later" / "note.md", "# Later\n\nNot indexed yet.\n")
    pygit2.init_repository(str(lib))
    head = commit_all(lib, "Add the compose samples and notes")
    home = root / "home"
    with ops.Brain(home) as brain:
        ops.library_add(brain, ops.LibraryAddInput(name="samples", path=str(lib)))
        ops.collect(brain, ops.CollectInput(embed=True))  # reindexes, then pairs the facts
        ops.git_import(brain, ops.GitImportInput())
        ops.library_add(brain, ops.LibraryAddInput(name="later", path=str(root / "later")))
        ids = [
            ops.get(brain, ops.GetInput(ref=f"samples:notes/{name}.md")).id
            for name in ("redis", "vue-port", "xss")
        ]
    return KnowledgeSite(home, root, *ids, head)
