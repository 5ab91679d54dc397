"""ask's written answer: the reasoner (a real SmolLM2-135M on llama.cpp) writes claims from the
numbered facts and notes, each citing them; what cites nothing given is dropped, confidences
never change, and without a usable reasoner the deterministic answer is all there is.

A toy model: these tests check structure, citations, calls and tokens, never the wording.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from brainmap import ops, written
from brainmap.config import load, save
from conftest import run_cli, write
from model_server import reasoner_home

COMPOSE = """\
services:
  web:
    image: example/web:1.2
    ports:
      - "8000:8000"
  redis:
    image: redis
"""
README = "# Shop\n\nStart it with `docker compose up`, then open http://localhost:8000.\n"
QUESTION = "which port does the web service of shop publish"


def _lab(home: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lab"
    write(lib / "shop" / "compose.yaml", COMPOSE)
    write(lib / "shop" / "README.md", README)
    write(lib / "notes" / "backups.md", "# Backups\n\nThe nightly backup job runs on the NAS.\n")
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="lab", path=str(lib)))
    ops.collect(brain, ops.CollectInput(embed=False))
    brain.close()


def _facts_table(home: Path) -> list[tuple[Any, ...]]:
    brain = ops.Brain(home)
    try:
        return sorted((r.subject, r.predicate, r.object, r.confidence,
                       json.dumps(r.props, sort_keys=True)) for r in brain.store.facts.assertions())  # fmt: skip
    finally:
        brain.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ask_writes_an_answer_citing_only_given_evidence(
    llm_url: str, home: Path, tmp_path: Path
) -> None:
    _lab(home, tmp_path)
    before = _facts_table(home)
    reasoner_home(home, llm_url)
    out = json.loads(run_cli(home, "ask", QUESTION, "--no-web", "--json").stdout)
    assert out["answer"] == "8000" and out["confirmed"] is True  # the deterministic one, first
    spent = out["reasoner"]
    assert spent["model"] == "smollm2" and spent["calls"] in (1, 2)  # one repair allowed
    assert spent["calls"] == 1 + spent["repairs"]
    assert spent["prompt_tokens"] > 0 and spent["completion_tokens"] > 0
    given = len(out["facts"]) + len(out["info"])
    assert given > 0
    if out["written"] is None:  # every claim was dropped: said, and nothing written
        assert out["claims"] == [] and any("answer:" in s for s in spent["skipped"])
    else:
        assert 1 <= len(out["claims"]) <= written.MAX_CLAIMS
        for claim in out["claims"]:
            assert claim["sources"] and all(1 <= n <= given for n in claim["sources"])
            assert 0 < len(claim["text"]) <= written.MAX_CLAIM_CHARS
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", out["written"])}
        assert cited == {n for c in out["claims"] for n in c["sources"]}
    # the day's ledger holds what the server counted
    usage = json.loads((home / "reasoner-usage.json").read_text())
    assert usage["tokens"] == spent["prompt_tokens"] + spent["completion_tokens"]
    assert _facts_table(home) == before  # no confidence, no fact changed
    # the text output: the deterministic answer first, then the written one with its sources
    text = run_cli(home, "ask", QUESTION, "--no-web").stdout
    assert text.startswith("answer: 8000")
    if "written by the reasoner" in text:
        tail = text.split("written by the reasoner", 1)[1]
        assert re.search(r"^  \[\d+\] ", tail, re.MULTILINE)  # each citation mapped to a source
    else:
        assert "written answer skipped: answer:" in text
    assert _facts_table(home) == before


def test_cited_drops_claims_that_cite_nothing_or_numbers_not_given() -> None:
    C = written.Claim
    claims = [
        C(text="Port 8000 [1].", sources=[1, 1]),  # its own citation removed, repeats once
        C(text="It cites nothing.", sources=[]),
        C(text="It cites a number not given.", sources=[1, 9]),
        C(text="port 8000 [1].", sources=[2]),  # the same claim again
        C(text="   \n ", sources=[2]),
        C(text="The README\nsays so.", sources=[3, 2]),
    ]
    evidence = {1: "web publishes port 8000", 2: "compose.yaml: web", 3: "the README says so"}
    kept = written.cited(claims, evidence)
    assert [(c.text, c.sources) for c in kept] == [
        ("Port 8000.", [1]), ("The README says so.", [3, 2])]  # fmt: skip
    assert written.render(kept) == "Port 8000. [1] The README says so. [3][2]"
    assert written.cited(claims, {}) == [] and written.render([]) is None


def test_cited_keeps_only_claims_grounded_in_what_they_cite_and_plain() -> None:
    C = written.Claim
    evidence = {1: "web publishes port 8000 (compose.yaml:12)", 2: "minecraft: port 25565"}
    claims = [
        C(text="2018-01-01T12:11:52.143 [1]", sources=[1]),  # a figure no evidence holds
        C(text="Port 9999 is published.", sources=[1]),  # the figure is not in what it cites
        C(text="Minecraft listens on 25565.", sources=[1]),  # true of [2], not of [1]
        C(text="The sky is blue.", sources=[2]),  # no word of it in [2]
        C(
            text="## web [[evil]] <img onerror=x> publishes [here](http://e.example) 8000",
            sources=[1],
        ),
        C(text="minecraft port 25565, key AKIAABCDEFGHIJKLMNOP", sources=[2]),
    ]
    kept = written.cited(claims, evidence)
    assert [c.sources for c in kept] == [[1], [2]]
    first, second = (c.text for c in kept)
    assert "8000" in first and "web" in first
    assert not any(mark in first for mark in ("#", "[", "]", "<", ">", "http"))
    assert "AKIAABCDEFGHIJKLMNOP" not in second


def test_the_schema_allows_only_the_given_numbers_and_few_short_claims() -> None:
    model = written.schema([1, 3])
    doc = json.dumps(model.model_json_schema())
    assert '"enum": [1, 3]' in doc and '"maxItems": 4' in doc and '"maxLength": 200' in doc
    model.model_validate({"claims": [{"text": "x", "sources": [3]}]})
    for bad in (
        {"claims": [{"text": "x", "sources": [2]}]},
        {"claims": [{"text": "x", "sources": []}]},
        {"claims": [{"text": "x" * 201, "sources": [1]}]},
        {"claims": [{"text": "x", "sources": [1]}] * 5},
        {"claims": [{"text": "x", "sources": [1], "extra": 1}]},
    ):
        with pytest.raises(ValidationError):
            model.model_validate(bad)


def test_ask_with_the_reasoner_down_keeps_the_deterministic_answer(
    home: Path, tmp_path: Path
) -> None:
    _lab(home, tmp_path)
    before = _facts_table(home)
    reasoner_home(home, f"http://127.0.0.1:{_closed_port()}/v1", retries=0)
    out = json.loads(run_cli(home, "ask", QUESTION, "--no-web", "--json").stdout)
    assert out["answer"] == "8000" and out["facts"]
    assert out["written"] is None and out["claims"] == []
    spent = out["reasoner"]
    assert spent["calls"] == 0 and spent["prompt_tokens"] == 0
    assert (
        spent["skipped"][0].startswith("answer: the reasoner at")
        and "cannot reach" in spent["skipped"][0]
    )
    text = run_cli(home, "ask", QUESTION, "--no-web").stdout
    assert text.startswith("answer: 8000") and "written answer skipped: answer:" in text
    assert _facts_table(home) == before


def test_without_a_reasoner_or_evidence_no_call_is_made(home: Path, tmp_path: Path) -> None:
    _lab(home, tmp_path)
    brain = ops.Brain(home)
    result = ops.ask(brain, ops.AskInput(question=QUESTION, web=False))
    assert result.answer == "8000" and result.written is None and result.reasoner is None
    brain.close()
    # configured, but its answer use is off: the same
    reasoner_home(home, f"http://127.0.0.1:{_closed_port()}/v1", retries=0, answer=False)
    brain = ops.Brain(home)
    result = ops.ask(brain, ops.AskInput(question=QUESTION, web=False))
    assert result.written is None and result.reasoner is None and result.claims == []
    brain.close()
    # on, but nothing to cite: no call (a call would have said why it was skipped)
    cfg = load(home)
    cfg.reasoner.answer = True
    save(cfg)
    brain = ops.Brain(home)
    result = ops.ask(brain, ops.AskInput(question="which host runs the mail relay", root="facts",
                                         web=False))  # fmt: skip
    assert result.facts == [] and result.info == []
    assert result.written is None and result.reasoner is None
    brain.close()
    assert not (home / "reasoner-usage.json").exists()
