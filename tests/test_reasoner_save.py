"""save / ingest with the reasoner: type, tags in the library's vocabulary and a title for an
untitled ingest, from one call to a real local model (SmolLM2-135M on llama.cpp); without a
reasoner, or when it is down, the neighbours' tags as before.

The model is toy-sized: these tests check structure, vocabulary membership, call and token
counts and the degraded paths, never wording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brainmap import ops
from brainmap.markdown import parse
from brainmap.notes import STANDARD_TYPES, SaveResult
from conftest import example_brain, free_port, run_cli

WAL = {
    "title": "SQLite WAL checkpoint starvation",
    "body": "Long-lived readers keep WAL checkpoints from completing and the WAL grows.",
}


@pytest.fixture
def smart(home: Path, library: Path, warm_cache: Path, llm_url: str) -> Any:
    brain = example_brain(home, library, warm_cache, url=llm_url)
    yield brain
    brain.close()


def _save(brain: ops.Brain, **kw: Any) -> SaveResult:
    return ops.save(brain, ops.SaveInput(library="example", **kw))


def _vocabulary(brain: ops.Brain) -> tuple[list[str], list[str]]:
    return brain.store.entries.vocabulary("example", limit=10_000)


def _usage(home: Path) -> dict[str, Any]:
    path = home / "reasoner-usage.json"
    return json.loads(path.read_text()) if path.exists() else {"calls": 0, "tokens": 0}


def test_a_save_without_tags_gets_type_and_tags_from_the_library_vocabulary(
    smart: ops.Brain, home: Path, library: Path
) -> None:
    types, tags = _vocabulary(smart)
    assert tags  # the example library has a vocabulary to choose from
    result = _save(smart, **WAL)
    assert result.status == "saved" and result.tags_suggested and result.tags
    assert len(result.tags) <= 5 and len(result.tags) == len(set(result.tags))
    assert sum(tag not in tags for tag in result.tags) <= 1  # at most one new tag
    spent = result.reasoner
    assert spent is not None and spent.calls == 1 and spent.model == "smollm2"
    assert spent.prompt_tokens > 0 and spent.completion_tokens > 0 and not spent.skipped
    assert _usage(home)["calls"] == 1 and _usage(home)["tokens"] == spent.tokens
    entry = parse((library / str(result.path)).read_text(), fallback_title="x")
    assert entry.tags == result.tags
    assert entry.type in {*STANDARD_TYPES, *types} and entry.type != "diary"


def test_a_save_with_tags_or_a_type_only_makes_no_call(smart: ops.Brain, home: Path) -> None:
    result = _save(smart, **WAL, tags=["sqlite"])
    assert result.status == "saved" and result.tags == ["sqlite"] and not result.tags_suggested
    assert result.reasoner is None and _usage(home)["calls"] == 0
    entry = ops.get(smart, ops.GetInput(ref=str(result.id)))
    assert entry.type == "note"  # a type is suggested only with the tags


def test_a_given_type_is_kept(smart: ops.Brain) -> None:
    result = _save(smart, **WAL, type="Decision")
    assert result.reasoner is not None and result.reasoner.calls == 1
    assert ops.get(smart, ops.GetInput(ref=str(result.id))).type == "decision"


def test_a_duplicate_makes_no_call(smart: ops.Brain, home: Path) -> None:
    assert _save(smart, **WAL, tags=["sqlite"]).status == "saved"
    again = _save(smart, **WAL)
    assert again.status == "duplicate" and again.reasoner is None
    assert _usage(home)["calls"] == 0


def test_tags_off_makes_no_call(
    home: Path, library: Path, warm_cache: Path, llm_url: str, tmp_path: Path
) -> None:
    brain = example_brain(home, library, warm_cache, url=llm_url, tags=False)
    plain = example_brain(tmp_path / "plain", library, warm_cache)
    try:
        result = _save(brain, **WAL)
        before = _save(plain, **WAL)
    finally:
        brain.close()
        plain.close()
    assert result.reasoner is None and _usage(home)["calls"] == 0
    assert result.tags == before.tags and "sqlite" in result.tags  # the neighbours' tags


def test_no_reasoner_behaves_as_before(brain: ops.Brain, home: Path) -> None:
    result = _save(brain, **WAL)
    assert result.status == "saved" and result.tags_suggested and "sqlite" in result.tags
    assert result.reasoner is None and not (home / "reasoner-usage.json").exists()
    assert ops.get(brain, ops.GetInput(ref=str(result.id))).type == "note"
    untitled = ops.ingest(
        brain,
        ops.IngestInput(text="Changelog 4.2: the --legacy flag is removed.", library="example"),
    )
    assert untitled.title == "Changelog 4.2: the --legacy flag is removed."
    assert untitled.reasoner is None


def test_a_reasoner_that_is_down_leaves_the_neighbours_tags(
    home: Path, library: Path, warm_cache: Path, tmp_path: Path
) -> None:
    brain = example_brain(
        home, library, warm_cache, url=f"http://127.0.0.1:{free_port()}/v1", retries=0
    )
    plain = example_brain(tmp_path / "plain", library, warm_cache)
    try:
        result = _save(brain, **WAL)
        before = _save(plain, **WAL)
    finally:
        brain.close()
        plain.close()
    assert result.status == "saved" and result.tags == before.tags and "sqlite" in result.tags
    spent = result.reasoner
    assert spent is not None and spent.calls == 0 and spent.tokens == 0
    assert len(spent.skipped) == 1 and spent.skipped[0].startswith("tags: ")
    assert "cannot reach" in spent.skipped[0]
    # the command line says so in one line, and --json carries it
    proc = run_cli(
        home, "save", "Vacuum after bulk deletes", "-b", "Free pages stay.", "-l", "example"
    )
    skipped = [line for line in proc.stderr.splitlines() if line.startswith("reasoner skipped: ")]
    assert len(skipped) == 1 and "cannot reach" in skipped[0]
    out = run_cli(home, "save", "Analyze after loads", "-b", "Stats.", "-l", "example", "--json")
    assert json.loads(out.stdout)["reasoner"]["skipped"][0].startswith("tags: ")


def test_an_untitled_ingest_gets_a_title_from_the_model(
    smart: ops.Brain, home: Path, library: Path
) -> None:
    text = "the --legacy flag is removed in 4.2; use --compat instead.\nSee the changelog."
    result = ops.ingest(smart, ops.IngestInput(text=text, library="example", tags=["cli"]))
    assert result.status == "saved" and str(result.path).startswith("inbox/")
    assert result.title.strip() and len(result.title) <= 80 and result.tags == ["cli"]
    assert result.reasoner is not None and result.reasoner.calls == 1
    entry = parse((library / str(result.path)).read_text(), fallback_title="x")
    assert entry.title == result.title and entry.type == "note"  # an ingest stays a note
    # a titled ingest with tags makes no call
    titled = ops.ingest(
        smart, ops.IngestInput(text="Another leaf.", title="Leaf", tags=["cli"], library="example")
    )
    assert titled.title == "Leaf" and titled.reasoner is None
    assert _usage(home)["calls"] == 1


def test_the_cli_json_shows_the_tokens(smart: ops.Brain, home: Path) -> None:
    proc = run_cli(home, "save", WAL["title"], "-b", WAL["body"], "-l", "example", "--json")
    spent = json.loads(proc.stdout)["reasoner"]
    assert spent["calls"] == 1 and spent["prompt_tokens"] > 0 and spent["completion_tokens"] > 0
    assert "reasoner skipped" not in proc.stderr
