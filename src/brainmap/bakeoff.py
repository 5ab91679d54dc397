"""The reasoner bake-off: models compared on the tasks brainmap gives them, on a labelled set.

For each model and task, every item of the set is asked once (one structured call, plus the
repair attempt the client makes for an invalid answer) and measured:

- latency: the wall time of the item, repair included; p50 and p95 by nearest rank (the
  smallest time that at least that share of the items took no longer than);
- validity: the share of items whose first answer matched the JSON schema (a repaired answer
  is counted in ``repaired``, one that failed twice in ``failed``);
- agreement with the labels, 0..1, averaged over the items (an item with no valid answer
  scores 0):

  - ``tags`` (a text and a vocabulary -> tags, as save asks for them): Jaccard of the tags
    given and expected;
  - ``expand`` (a query -> the rewrites and HyDE passage ``search --expand`` asks for):
    recall of the expected key terms in them;
  - ``summary`` (diary lines -> the diary's session summary, a text answer, so always
    "valid"): recall of the expected key terms;
  - ``answer`` (numbered evidence and a question -> claims citing it, as ``ask`` writes
    them): 1 when a kept claim cites an expected evidence number, else 0;

  an expected term counts when it appears in the answer, case-insensitively, and may list
  alternatives as ``a|b``;
- tokens: prompt and completion tokens the server reported (repairs included).

The labelled set ships with the package (``brainmap/bakeoff.json``), 8 items per task;
another file of the same shape can be given. A model that cannot be reached (or the daily
budget) ends that model's task early, with the error.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from brainmap import written
from brainmap.config import Config
from brainmap.errors import UserError
from brainmap.progress import ProgressFn
from brainmap.reasoner import Reasoner, ReasonerUnavailable

Task = Literal["tags", "expand", "summary", "answer"]
TASKS: tuple[Task, ...] = ("tags", "expand", "summary", "answer")
MAX_TAGS = 3


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- the labelled set -----------------------------------------------------------------------


class TagsItem(_Strict):
    text: str = Field(min_length=1, max_length=2000)
    vocabulary: list[str] = Field(min_length=1, max_length=50)
    expect: list[str] = Field(max_length=MAX_TAGS)


class ExpandItem(_Strict):
    query: str = Field(min_length=1, max_length=500)
    expect: list[str] = Field(min_length=1, max_length=10)


class SummaryItem(_Strict):
    lines: list[str] = Field(min_length=1, max_length=40)
    expect: list[str] = Field(min_length=1, max_length=10)


class AnswerItem(_Strict):
    question: str = Field(min_length=1, max_length=500)
    evidence: list[str] = Field(min_length=1, max_length=written.MAX_EVIDENCE)
    expect: list[int] = Field(min_length=1)  # evidence numbers (from 1); citing one counts


class LabelledSet(_Strict):
    about: str = ""
    tags: list[TagsItem] = Field(default_factory=list)
    expand: list[ExpandItem] = Field(default_factory=list)
    summary: list[SummaryItem] = Field(default_factory=list)
    answer: list[AnswerItem] = Field(default_factory=list)


def default_set_path() -> str:
    return str(resources.files("brainmap").joinpath("bakeoff.json"))


def load_set(path: str | None = None) -> LabelledSet:
    """The labelled set: the packaged one, or the file at ``path``."""
    source = resources.files("brainmap").joinpath("bakeoff.json") if path is None else Path(path)
    try:
        return LabelledSet.model_validate_json(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read the labelled set {source}: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserError(f"the labelled set {source} is not valid: {where}: {first['msg']}",
                        hint="see brainmap/bakeoff.json for its shape") from None  # fmt: skip


# --- the tasks ------------------------------------------------------------------------------


# Each task asks through the product's own code, so that the bake-off measures what brainmap
# sends: save's labels, search's expansion, the diary's session summary, ask's written answer.


def _ask_tags(r: Reasoner, item: TagsItem) -> float:
    from brainmap.notes import suggest_labels

    got = suggest_labels(r, "", item.text, types=None, vocabulary=list(item.vocabulary))
    return jaccard(got.tags, item.expect)


def _ask_expand(r: Reasoner, item: ExpandItem) -> float:
    from brainmap.expansion import rewrites

    return recall(" ".join(rewrites(r, item.query)), item.expect)


def _ask_summary(r: Reasoner, item: SummaryItem) -> float:
    from brainmap.diary import summarize_section

    return recall(summarize_section(r, "\n".join(item.lines)), item.expect)


def _ask_answer(r: Reasoner, item: AnswerItem) -> float:
    evidence = dict(enumerate(item.evidence, 1))
    claims = written.write(r, item.question, evidence)
    return 1.0 if {n for c in claims for n in c.sources} & set(item.expect) else 0.0


_ASK: dict[str, Callable[[Reasoner, Any], float]] = {
    "tags": _ask_tags, "expand": _ask_expand, "summary": _ask_summary, "answer": _ask_answer,
}  # fmt: skip


# --- the scores -----------------------------------------------------------------------------


def jaccard(got: Sequence[str], expected: Sequence[str]) -> float:
    """|got ∩ expected| / |got ∪ expected|; 1 when both are empty."""
    a, b = {g.lower() for g in got}, {e.lower() for e in expected}
    return len(a & b) / len(a | b) if a | b else 1.0


def recall(text: str, expected: Sequence[str]) -> float:
    """The share of expected terms found in ``text`` (a term ``a|b`` is found by either)."""
    low = text.lower()
    found = sum(any(alt.strip().lower() in low for alt in term.split("|")) for term in expected)
    return found / len(expected) if expected else 1.0


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile: the smallest value at least ``p`` % of values do not exceed."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# --- the run --------------------------------------------------------------------------------


@dataclass
class TaskScore:
    """One model on one task."""

    model: str
    task: str
    items: int  # asked
    p50_ms: float
    p95_ms: float
    validity: float  # first answers that matched the schema / items asked
    repaired: int  # items valid only after the repair attempt
    failed: int  # items with no valid answer (invalid twice, or no answer)
    agreement: float  # 0..1, the task's score averaged over the items asked
    calls: int
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None  # why the task ended early (unreachable, budget)


@dataclass
class BakeoffReport:
    data: str  # the labelled set used
    scores: list[TaskScore] = field(default_factory=list)


def run(
    cfg: Config,
    models: Sequence[str],
    tasks: Sequence[str],
    *,
    data: str | None = None,
    limit: int | None = None,
    progress: ProgressFn | None = None,
) -> BakeoffReport:
    """Ask every model every item of every task (the first ``limit`` items of each)."""
    labelled = load_set(data)
    report = BakeoffReport(data or default_set_path())
    for model in models:
        for task in tasks:
            items: list[Any] = list(getattr(labelled, task))[:limit]
            if not items:
                continue
            with Reasoner.of(cfg, model=model) as reasoner:
                report.scores.append(_one(reasoner, task, items, progress))
    return report


def _one(
    reasoner: Reasoner, task: str, items: Sequence[Any], progress: ProgressFn | None
) -> TaskScore:
    ask = _ASK[task]
    spent = reasoner.spent
    times: list[float] = []
    scores: list[float] = []
    first_valid = repaired = failed = 0
    error = None
    label = f"{reasoner.model}: {task}"
    for done, item in enumerate(items):
        if progress is not None:
            progress(label, done, len(items))
        repairs = spent.repairs
        started = time.monotonic()
        try:
            score = ask(reasoner, item)
        except ReasonerUnavailable as exc:
            times.append((time.monotonic() - started) * 1000)
            scores.append(0.0)
            failed += 1
            if spent.repairs == repairs:  # not an invalid answer: unreachable, over budget
                error = exc.message
                break
            continue
        times.append((time.monotonic() - started) * 1000)
        scores.append(score)
        if spent.repairs == repairs:
            first_valid += 1
        else:
            repaired += 1
    if progress is not None:
        progress(label, len(items), len(items))
    asked = len(scores)
    return TaskScore(
        model=reasoner.model, task=task, items=asked,
        p50_ms=round(percentile(times, 50), 1), p95_ms=round(percentile(times, 95), 1),
        validity=round(first_valid / asked, 3) if asked else 0.0, repaired=repaired,
        failed=failed, agreement=round(sum(scores) / asked, 3) if asked else 0.0,
        calls=spent.calls, prompt_tokens=spent.prompt_tokens,
        completion_tokens=spent.completion_tokens, error=error,
    )  # fmt: skip
