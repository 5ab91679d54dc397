"""YAML read as a tree of nodes that remember their line, with every scalar kept as written.

Values stay strings: PyYAML's YAML 1.1 resolver would read an unquoted ``80:80`` as the
sexagesimal number 4880 and ``no`` as False, which is wrong for ports and names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brainmap.collectors import clean

if TYPE_CHECKING:
    import yaml


@dataclass(slots=True)
class Node:
    """A mapping (dict of str -> Node), a sequence (list of Node) or a scalar (str)."""

    value: Any
    line: int  # 1-based
    tag: str = ""  # an explicit local tag (compose's ``!override``, ``!reset``), else ""

    def get(self, key: str) -> Node | None:
        return self.value.get(key) if isinstance(self.value, dict) else None

    @property
    def items(self) -> list[Node]:
        return self.value if isinstance(self.value, list) else []

    @property
    def mapping(self) -> dict[str, Node]:
        return self.value if isinstance(self.value, dict) else {}

    @property
    def text(self) -> str | None:
        return self.value if isinstance(self.value, str) else None


class BudgetExceeded(ValueError):
    """The file expands to more nodes than any real config has: an alias bomb."""


def parse(text: str, first_line: int = 1) -> Node | None:
    """The tree of the first YAML document in ``text`` (None when it is not YAML).

    Raises :class:`BudgetExceeded` when it expands past ``MAX_NODES``: what was read before
    the budget ran out could be any part of the file, so facts from it would be a silent
    guess (an alias bomb ahead of ``services:`` hides every service)."""
    import yaml  # imported on use: it costs 20 ms, and most commands read no config

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):  # RecursionError: hostile nesting
        return None
    if root is None:
        return None
    return _convert(root, first_line - 1, 0, [MAX_NODES])


MAX_NODES = 200_000  # aliases can make a small file a huge tree ("billion laughs"): stop there


def _convert(node: yaml.Node, offset: int, depth: int, budget: list[int]) -> Node:
    converted = _convert_value(node, offset, depth, budget)
    if node.tag.startswith("!") and not node.tag.startswith("!!"):
        converted.tag = node.tag
    return converted


def _convert_value(node: yaml.Node, offset: int, depth: int, budget: list[int]) -> Node:
    import yaml

    line = node.start_mark.line + 1 + offset
    budget[0] -= 1
    if budget[0] < 0:
        raise BudgetExceeded(f"YAML node budget exceeded ({MAX_NODES:,} nodes; an alias bomb?)")
    if depth > 64:  # hostile nesting: stop descending
        return Node(None, line)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Node] = {}
        merged: list[Node] = []
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            child = _convert(value, offset, depth + 1, budget)
            if key.value == "<<":  # merge keys: `<<: *base` or `<<: [*a, *b]`
                merged += child.items if isinstance(child.value, list) else [child]
                continue
            child.line = key.start_mark.line + 1 + offset  # "web:" names the block
            out.setdefault(clean(str(key.value)), child)
        for base in merged:  # keys written in the mapping itself win over merged ones
            for name, child in base.mapping.items():
                out.setdefault(name, child)
        return Node(out, line)
    if isinstance(node, yaml.SequenceNode):
        return Node([_convert(v, offset, depth + 1, budget) for v in node.value], line)
    return Node(clean(str(node.value)) if node.value is not None else None, line)
