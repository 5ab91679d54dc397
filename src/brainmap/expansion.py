"""Query expansion by the reasoner: one call that rewrites a search query (keyword rewrites,
paraphrases and a HyDE passage). ``search --expand`` and the bake-off's expand task both ask
through :func:`rewrites`, so that the bake-off measures what search sends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

if TYPE_CHECKING:
    from brainmap.reasoner import Reasoner

EXPAND_SYSTEM = (
    "Rewrite the user's search query to find notes about it. Reply with a JSON object: "
    "lexical: 2 short keyword queries with other words for the same thing; "
    "semantic: 2 rephrasings of the question; "
    "hyde: 2 sentences a note answering it might say.\n"
    "Example query: how do I free disk space\n"
    'Example reply: {"lexical": ["disk full cleanup", "remove large files"], '
    '"semantic": ["what can I delete when the disk is full", "how to reclaim storage"], '
    '"hyde": "When the disk is full, remove old logs and caches. du -sh shows what takes space."}'
)
EXPAND_MAX_TOKENS = 256  # the longest answer the schema allows is ~600 characters
MAX_QUERY_CHARS = 1000


class Expansion(BaseModel):
    # tight: a small model fills every string to its limit, and an answer cut off at
    # max_tokens is no JSON
    model_config = ConfigDict(extra="forbid")
    lexical: list[Annotated[str, StringConstraints(min_length=1, max_length=48)]] = Field(
        max_length=2
    )
    semantic: list[Annotated[str, StringConstraints(min_length=1, max_length=100)]] = Field(
        max_length=2
    )
    hyde: str = Field(max_length=300)


def rewrites(reasoner: Reasoner, query: str) -> list[str]:
    """The reasoner's rewrites of ``query``: keyword queries, paraphrases, then the HyDE
    passage; raises :class:`~brainmap.reasoner.ReasonerUnavailable` when it gives none."""
    answer = reasoner.json(
        EXPAND_SYSTEM, query[:MAX_QUERY_CHARS], Expansion, max_tokens=EXPAND_MAX_TOKENS
    )
    texts = [*answer.lexical, *answer.semantic, answer.hyde]
    # a small model may copy the prompt's example: that is no rewrite of this query
    prompt = EXPAND_SYSTEM.casefold()
    return [t for t in texts if t.strip() and t.strip().casefold() not in prompt]
