"""`brainmap reasoner status` and `brainmap reasoner bakeoff`, through the real command, against
a real local model server (SmolLM2-135M on llama.cpp under two names) and a closed port.

The labelled set is the one the package ships (``brainmap/bakeoff.json``): tests read it from
the installed package, there is no copy under tests/. A toy model: these tests check the
report's structure, counts and tokens, never how well it scores.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from brainmap import bakeoff, written
from brainmap.cli import reasoner as cli_reasoner
from brainmap.errors import UserError
from conftest import run_cli, write
from model_server import reasoner_home


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_json_line(stdout: str) -> dict[str, Any]:
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    out: dict[str, Any] = json.loads(lines[0])
    return out


def test_bakeoff_of_two_real_models_on_tags(llm_url: str, home: Path) -> None:
    reasoner_home(home, llm_url)
    items = len(bakeoff.load_set().tags)
    proc = run_cli(home, "reasoner", "bakeoff", "--model", "smollm2", "--model", "smollm2-b",
                   "--task", "tags", "--json")  # fmt: skip
    report = _one_json_line(proc.stdout)
    assert report["data"] == bakeoff.default_set_path()
    scores = report["scores"]
    assert isinstance(scores, list)
    assert [(s["model"], s["task"]) for s in scores] == [("smollm2", "tags"), ("smollm2-b", "tags")]
    for s in scores:
        assert s["error"] is None and s["items"] == items
        assert 0 < s["p50_ms"] <= s["p95_ms"]
        assert 0 <= s["validity"] <= 1 and 0 <= s["agreement"] <= 1
        assert s["validity"] == round((items - s["repaired"] - s["failed"]) / items, 3)
        # one call per item, and one more for each repair asked
        assert s["calls"] == items + s["repaired"] + s["failed"]
        assert s["prompt_tokens"] > 0 and s["completion_tokens"] > 0
    usage = json.loads((home / "reasoner-usage.json").read_text())
    assert usage["tokens"] == sum(s["prompt_tokens"] + s["completion_tokens"] for s in scores)
    # the table: a header and one row per model and task, whole whatever the width
    text = run_cli(home, "reasoner", "bakeoff", "-m", "smollm2", "-m", "smollm2-b",
                   "-t", "tags", "--limit", "2").stdout  # fmt: skip
    lines = text.splitlines()
    assert lines[0].split() == ["model", "task", "items", "p50", "ms", "p95", "ms", "valid",
                                "repaired", "failed", "agreement", "tokens"]  # fmt: skip
    assert [line.split()[:3] for line in lines[1:3]] == [["smollm2", "tags", "2"],
                                                         ["smollm2-b", "tags", "2"]]  # fmt: skip
    assert lines[3] == f"labelled set: {bakeoff.default_set_path()}"


def test_status_answers_against_the_real_server_and_not_a_closed_port(
    llm_url: str, home: Path
) -> None:
    reasoner_home(home, llm_url)
    status = _one_json_line(run_cli(home, "reasoner", "status", "--json").stdout)
    assert status["answers"] is True and status["configured"] is True
    assert "smollm2" in status["models"]
    assert status["error"] is None and status["budget_left"] == status["budget"]
    text = run_cli(home, "reasoner", "status").stdout
    assert "answers      yes in" in text and "answer on" in text
    reasoner_home(home, f"http://127.0.0.1:{_closed_port()}/v1", retries=0)
    proc = run_cli(home, "reasoner", "status", "--json", check=False)
    assert proc.returncode == 1
    status = _one_json_line(proc.stdout)
    assert status["answers"] is False and status["error"]
    proc = run_cli(home, "reasoner", "status", check=False)
    assert proc.returncode == 1 and "answers      no: " in proc.stdout


def test_bakeoff_against_a_closed_port_ends_with_the_error(home: Path) -> None:
    reasoner_home(home, f"http://127.0.0.1:{_closed_port()}/v1", retries=0)
    proc = run_cli(home, "reasoner", "bakeoff", "-t", "tags", "-t", "answer", "--json", check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    report = _one_json_line(proc.stdout)
    scores = report["scores"]
    assert isinstance(scores, list) and [s["task"] for s in scores] == ["tags", "answer"]
    for s in scores:  # the first item told it: the others were not asked
        assert s["items"] == 1 and s["failed"] == 1 and s["calls"] == 0
        assert "cannot reach" in s["error"] and s["validity"] == 0
    assert proc.stderr.count("error: smollm2") == 2


def test_without_a_reasoner_the_commands_say_so(home: Path, tmp_path: Path) -> None:
    for args in (("status",), ("bakeoff", "--task", "tags")):
        proc = run_cli(home, "reasoner", *args, check=False)
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr.startswith("error: no reasoner configured\nhint: set [reasoner] url")
        assert "Traceback" not in proc.stderr
    reasoner_home(home, f"http://127.0.0.1:{_closed_port()}/v1")
    bad = write(tmp_path / "set.json", json.dumps({"tags": [{"text": "x", "expect": []}]}))
    proc = run_cli(home, "reasoner", "bakeoff", "--data", str(bad), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "is not valid: tags.0.vocabulary: Field required" in proc.stderr
    proc = run_cli(home, "reasoner", "bakeoff", "--task", "poems", check=False)
    assert proc.returncode == 2 and "Invalid value for '--task'" in proc.stderr


def test_the_packaged_labelled_set_is_small_and_consistent() -> None:
    labelled = bakeoff.load_set()
    assert cli_reasoner.TASKS == bakeoff.TASKS
    for task in bakeoff.TASKS:
        assert 8 <= len(getattr(labelled, task)) <= 12, task
    for item in labelled.tags:
        assert item.expect and set(item.expect) <= set(item.vocabulary)
    for answer in labelled.answer:
        assert all(1 <= n <= len(answer.evidence) for n in answer.expect)
        assert len(answer.evidence) <= written.MAX_EVIDENCE


def test_the_scores() -> None:
    assert bakeoff.jaccard(["nginx", "Logging"], ["logging", "nginx"]) == 1.0
    assert bakeoff.jaccard(["nginx", "docker"], ["nginx"]) == 0.5
    assert bakeoff.jaccard([], ["git"]) == 0.0 and bakeoff.jaccard([], []) == 1.0
    assert bakeoff.recall("Run git revert HEAD", ["git", "reset|revert", "log"]) == pytest.approx(
        2 / 3
    )
    assert bakeoff.recall("anything", []) == 1.0
    times = [float(t) for t in range(1, 21)]  # 1..20
    assert bakeoff.percentile(times, 50) == 10 and bakeoff.percentile(times, 95) == 19
    assert bakeoff.percentile([7.0], 95) == 7 and bakeoff.percentile([], 50) == 0
    with pytest.raises(UserError, match="cannot read the labelled set"):
        bakeoff.load_set("/nonexistent/set.json")
