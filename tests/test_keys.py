"""Typed keys: node keys (``kind:name``) and entry references (``library:path``)."""

from __future__ import annotations

import pytest

from brainmap.keys import EntryRef, NodeKey, kind_of, name_of


@pytest.mark.parametrize(
    ("key", "kind", "name"),
    [
        ("entity:redis", "entity", "redis"),
        ("service:samples/app/web", "service", "samples/app/web"),
        ("image:redis:7", "image", "redis:7"),  # the name keeps its own colons
        ("url:http://localhost:8000/", "url", "http://localhost:8000/"),
        ("slug:", "slug", ""),
    ],
)
def test_a_node_key_parses_at_its_first_colon_and_prints_back(
    key: str, kind: str, name: str
) -> None:
    node = NodeKey.parse(key)
    assert (node.kind, node.name) == (kind, name)
    assert (kind_of(key), name_of(key)) == (kind, name)
    assert str(node) == key
    assert NodeKey.parse(str(NodeKey(kind, name))) == node


def test_a_key_without_a_colon_is_all_name() -> None:
    assert NodeKey.parse("redis") == NodeKey("", "redis")
    assert (kind_of("redis"), name_of("redis")) == ("", "redis")
    assert str(NodeKey.parse("redis")) == "redis"
    assert NodeKey.parse("") == NodeKey("", "")


def test_node_keys_are_values() -> None:
    assert NodeKey.parse("host:nas") == NodeKey("host", "nas")
    assert len({NodeKey.parse("host:nas"), NodeKey("host", "nas")}) == 1


@pytest.mark.parametrize(
    ("ref", "library", "path"),
    [
        ("docs:ops/Release-1.2.md", "docs", "ops/Release-1.2.md"),
        ("docs:notes/10:30 standup.md", "docs", "notes/10:30 standup.md"),  # colons in a path
        ("docs:", "docs", ""),
    ],
)
def test_an_entry_ref_parses_at_its_first_colon_and_prints_back(
    ref: str, library: str, path: str
) -> None:
    entry = EntryRef.parse(ref)
    assert (entry.library, entry.path) == (library, path)
    assert str(entry) == ref
    assert EntryRef.parse(str(EntryRef(library, path))) == entry


def test_an_entry_ref_without_a_colon_names_no_library() -> None:
    assert EntryRef.parse("ops/Release-1.2.md") == EntryRef("", "ops/Release-1.2.md")
    assert str(EntryRef("", "release-1.2")) == "release-1.2"
