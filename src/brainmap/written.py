"""A short answer the reasoner writes from numbered evidence, each claim citing its sources.

The caller numbers its evidence (``ask``: its facts, then its info snippets) and gives each a
line of text. One structured call asks for at most :data:`MAX_CLAIMS` claims, each citing
evidence numbers; the schema allows only the numbers given. Whatever comes back, a claim
that cites nothing, or cites a number that was not given, is dropped (:func:`cited`): what
the model cannot cite is not said. The written answer never changes the evidence; it is
shown after the deterministic answer, which stays the authoritative one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from brainmap.collectors.secrets import redact
from brainmap.reasoner import Reasoner

MAX_CLAIMS = 4
MAX_CLAIM_CHARS = 200
MAX_SOURCES = 4  # per claim
MAX_EVIDENCE = 12  # lines given to the model
MAX_LINE_CHARS = 300  # of one evidence line
MAX_TOKENS = 320

SYSTEM = (
    "You answer a question using only the numbered evidence given. Write at most "
    f"{MAX_CLAIMS} short claims. Each claim states one thing the evidence says and cites the "
    "numbers of the evidence it rests on. Never state anything the evidence does not say. "
    "Keep the confidence the evidence gives: a hypothesis, partial or contradicted fact is "
    "not stated as certain. When the evidence does not answer the question, give no claims."
)
_CITATION = re.compile(r"\s*\[\s*\d+\s*\]")  # the model's own "[2]": ours are appended
_MARKUP = re.compile(r"\[\[|\]\]|\]\([^)]*\)|!?\[|\]|`+|\*\*|__")
_LEAD = re.compile(r"^(?:[-#>*+|=~\s]|\d+[.)]\s)+")
_NUMBER = re.compile(r"\d+(?:[.:,]\d+)*")
_WORD = re.compile(r"\w+")


class Claim(BaseModel):
    """One claim of a written answer."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_CLAIM_CHARS)
    sources: list[int] = Field(max_length=MAX_SOURCES)  # evidence numbers


class Claims(BaseModel):
    model_config = ConfigDict(extra="forbid")
    claims: list[Claim] = Field(max_length=MAX_CLAIMS)


def schema(numbers: Sequence[int]) -> type[Claims]:
    """:class:`Claims` whose sources can only be ``numbers`` (an enum in the JSON schema)."""
    number: Any = Literal.__getitem__(tuple(numbers))
    claim: Any = create_model(
        "Claim", __base__=Claim,
        sources=(list[number], Field(min_length=1, max_length=MAX_SOURCES)),
    )  # fmt: skip
    return create_model(
        "Claims", __base__=Claims, claims=(list[claim], Field(max_length=MAX_CLAIMS))
    )


def prompt(question: str, evidence: Mapping[int, str]) -> str:
    """The user message: the question and the evidence, one numbered line each."""
    lines = [f"[{n}] {_one_line(text, MAX_LINE_CHARS)}" for n, text in evidence.items()]
    return f"Question: {_one_line(question, 500)}\n\nEvidence:\n" + "\n".join(lines)


def cited(claims: Sequence[Claim], evidence: Mapping[int, str]) -> list[Claim]:
    """The claims kept: each cites at least one number, and only numbers of ``evidence``, and
    is grounded in what it cites (every number it states, and at least one of its words, is in
    that evidence); its text is one plain line (no markup, links or secrets, no citations of
    its own); a repeated claim is kept once."""
    out: list[Claim] = []
    seen: set[str] = set()
    for claim in claims:
        if len(out) == MAX_CLAIMS:
            break
        text = _plain(claim.text)
        sources = list(dict.fromkeys(claim.sources))
        if not text or not sources or not set(sources) <= set(evidence) or text.lower() in seen:
            continue
        if not _grounded(text, " ".join(evidence[n] for n in sources)):
            continue
        seen.add(text.lower())
        out.append(Claim(text=text, sources=sources))
    return out


def _plain(text: str) -> str:
    # shown in a terminal, JSON and MCP answers: one line of text, nothing that renders
    text = redact(_CITATION.sub("", text))
    text = _MARKUP.sub(" ", text.replace("<", " ").replace(">", " "))
    return _one_line(_LEAD.sub("", " ".join(text.split())), MAX_CLAIM_CHARS)


def _grounded(text: str, cited: str) -> bool:
    haystack = cited.lower()
    if any(number not in haystack for number in _NUMBER.findall(text)):
        return False  # a figure the evidence does not hold: said by the model alone
    words = [w for w in _WORD.findall(text.lower()) if len(w) >= 4]
    return not words or any(w in haystack for w in words)


def render(claims: Sequence[Claim]) -> str | None:
    """``Claim one. [1][3] Claim two. [2]``; None without claims."""
    parts = [f"{claim.text} " + "".join(f"[{n}]" for n in claim.sources) for claim in claims]
    return " ".join(parts) or None


def write(reasoner: Reasoner, question: str, evidence: Mapping[int, str]) -> list[Claim]:
    """One call: the claims the model wrote from ``evidence`` that cite it (:func:`cited`).
    Raises :class:`~brainmap.reasoner.ReasonerUnavailable` as :meth:`Reasoner.json` does."""
    given = list(evidence)[:MAX_EVIDENCE]
    if not given:
        return []
    shown = {n: evidence[n] for n in given}
    answer = reasoner.json(SYSTEM, prompt(question, shown), schema(given), max_tokens=MAX_TOKENS)
    return cited(answer.claims, shown)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
