"""search --expand: the reasoner's rewrites of a query (keywords, paraphrases, a HyDE passage)
searched too and fused by RRF, from one call to a real local model (SmolLM2-135M on llama.cpp);
without a reasoner, or when it is down, the plain hits and a note of what was skipped.

The model is toy-sized: these tests check structure, call and token counts, the grading and the
degraded paths, never wording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brainmap import ops
from brainmap.fusion import rrf
from brainmap.search import SearchResult
from conftest import example_brain, free_port, run_cli

QUERY = "how do I undo the last commit"


def _search(brain: ops.Brain, query: str = QUERY, **kw: Any) -> SearchResult:
    return ops.search(brain, ops.SearchInput(query=query, **kw))


def _ids(result: SearchResult) -> list[int]:
    return [h.chunk_id for h in result.hits]


def _usage(home: Path) -> dict[str, Any]:
    path = home / "reasoner-usage.json"
    return json.loads(path.read_text()) if path.exists() else {"calls": 0, "tokens": 0}


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    fused = dict(rrf([[1, 2, 3], [3, 4]], [2.0, 1.0], 2))
    assert fused[3] == pytest.approx(2 / 5 + 1 / 3) and fused[1] == pytest.approx(2 / 3)
    assert [cid for cid, _ in rrf([[1, 2], [2, 1]], [1.0, 1.0], 2)] == [1, 2]  # ties by id


def test_expand_makes_one_call_reports_tokens_and_returns_hits(
    home: Path, library: Path, warm_cache: Path, llm_url: str
) -> None:
    brain = example_brain(home, library, warm_cache, url=llm_url)
    try:
        plain = _search(brain, expand=False)
        result = _search(brain, expand=True)
    finally:
        brain.close()
    spent = result.reasoner
    assert plain.reasoner is None and plain.expansions == []
    assert spent is not None and spent.model == "smollm2"
    assert spent.calls == 1 + spent.repairs and spent.calls <= 2  # one call, one repair at most
    assert spent.prompt_tokens > 0 and spent.completion_tokens > 0
    assert _usage(home)["calls"] == spent.calls and _usage(home)["tokens"] == spent.tokens
    assert result.hits and len(result.hits) <= 10
    if not spent.skipped:  # an answer that validated: its rewrites were searched too
        assert 1 <= len(result.expansions) <= 5
        assert QUERY not in result.expansions and all(e.strip() for e in result.expansions)
    # levels come from the original query: its best hit stays a strong match, first or not
    assert result.match == plain.match == "strong"
    assert "patterns/git-undo-commit.md" in [h.path for h in result.hits[:3]]
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    for hit in result.hits:
        assert hit.match in ("strong", "weak", "none")


def test_without_a_reasoner_expand_gives_the_plain_hits_and_says_so(brain: ops.Brain) -> None:
    plain = _search(brain)
    result = _search(brain, expand=True)
    assert _ids(result) == _ids(plain) != [] and result.expansions == []
    assert result.reasoner is not None and result.reasoner.calls == 0
    assert result.reasoner.skipped == [
        "expand: no reasoner configured ([reasoner] url in config.toml)"
    ]
    assert plain.reasoner is None  # not asked: nothing to say


def test_the_reasoner_down_gives_the_plain_hits_and_says_so(
    home: Path, library: Path, warm_cache: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    brain = example_brain(home, library, warm_cache, url=url, retries=0, timeout_s=2.0)
    try:
        plain = _search(brain, expand=False)
        result = _search(brain, expand=True)
    finally:
        brain.close()
    assert _ids(result) == _ids(plain) != [] and result.expansions == []
    spent = result.reasoner
    assert spent is not None and spent.calls == 0 and spent.tokens == 0
    assert len(spent.skipped) == 1 and spent.skipped[0].startswith("expand: the reasoner at")
    assert "gave no answer" in spent.skipped[0]
    assert _usage(home)["tokens"] == 0  # the reservation was given back


def test_the_config_default_applies_and_the_input_overrides_it(
    home: Path, library: Path, warm_cache: Path, llm_url: str
) -> None:
    brain = example_brain(home, library, warm_cache, url=llm_url, expand=True)
    try:
        default = _search(brain)  # expand None: [reasoner] expand = true
        off = _search(brain, expand=False)
    finally:
        brain.close()
    assert default.reasoner is not None and default.reasoner.calls >= 1
    assert off.reasoner is None and off.expansions == []
    assert _usage(home)["calls"] == default.reasoner.calls  # expand=False asked nothing


def test_a_nonsense_query_stays_below_the_floor_when_expanded(
    home: Path, library: Path, warm_cache: Path, llm_url: str
) -> None:
    brain = example_brain(home, library, warm_cache, url=llm_url)
    try:
        result = _search(brain, "qzxv wrrpt flombix", expand=True)
    finally:
        brain.close()
    # whatever the rewrites found, the query itself matches nothing: no hits, match none
    assert result.reasoner is not None and result.reasoner.calls >= 1
    assert result.hits == [] and result.match == "none"


def test_the_cli_expands_and_prints_json(
    home: Path, library: Path, warm_cache: Path, llm_url: str
) -> None:
    example_brain(home, library, warm_cache, url=llm_url).close()
    proc = run_cli(home, "search", QUERY, "--expand", "--json", "-n", "5")
    out = json.loads(proc.stdout)
    assert out["reasoner"]["calls"] >= 1 and out["reasoner"]["prompt_tokens"] > 0
    assert out["hits"] and len(out["hits"]) <= 5 and isinstance(out["expansions"], list)
    plain = json.loads(run_cli(home, "search", QUERY, "--no-expand", "--json").stdout)
    assert plain["reasoner"] is None and plain["expansions"] == []


def test_the_cli_says_when_expansion_was_skipped(brain: ops.Brain, home: Path) -> None:
    brain.close()
    proc = run_cli(home, "search", QUERY, "--expand")
    assert "expansion skipped, plain search: expand: no reasoner configured" in proc.stderr
    assert "Undo the last git commit" in proc.stdout
