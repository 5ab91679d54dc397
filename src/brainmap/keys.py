"""Typed keys: a graph node's ``kind:name`` and an entry reference's ``library:path``.

Both travel as plain strings (in the database, JSON and URLs); these types are how code takes
them apart and puts them together, so that no module splits on ``":"`` by hand.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeKey:
    """A graph node's key: ``entity:redis``, ``entry:docs/a.md``, ``service:shop/web``.

    ``kind`` is the text before the first ``":"``; ``name`` is the rest and may itself hold
    colons (``image:redis:7``). A string without a colon parses as kind ``""``.
    """

    kind: str
    name: str

    @classmethod
    def parse(cls, key: str) -> NodeKey:
        """Take a key apart at its first colon: ``image:redis:7`` -> (``image``, ``redis:7``)."""
        kind, sep, name = key.partition(":")
        return cls(kind, name) if sep else cls("", kind)

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.kind else self.name


def kind_of(key: str) -> str:
    """The kind of a node key (``"entity"`` for ``entity:redis``); ``""`` without a colon."""
    return NodeKey.parse(key).kind


def name_of(key: str) -> str:
    """The name of a node key (``"redis"`` for ``entity:redis``); the key without a colon."""
    return NodeKey.parse(key).name


@dataclass(frozen=True, slots=True)
class EntryRef:
    """A reference to an entry, ``library:relative/path.md``; ``library`` is ``""`` when the
    reference names no library (a bare path or slug)."""

    library: str
    path: str

    @classmethod
    def parse(cls, ref: str) -> EntryRef:
        """Take a reference apart at its first colon (library names hold none; paths may)."""
        library, sep, path = ref.partition(":")
        return cls(library, path) if sep else cls("", library)

    def __str__(self) -> str:
        return f"{self.library}:{self.path}" if self.library else self.path
