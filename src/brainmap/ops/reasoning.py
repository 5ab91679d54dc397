"""Ops on the optional reasoner ([reasoner] in config.toml): its status and the bake-off.

Both belong to the CLI only: the bake-off spends the day's token budget on purpose.
"""

from __future__ import annotations

from pydantic import Field

from brainmap import bakeoff
from brainmap.ops import health
from brainmap.ops.core import Brain, _Input, op
from brainmap.ops.health import ReasonerStatus
from brainmap.ops.library import NoInput
from brainmap.progress import ProgressFn
from brainmap.reasoner import Reasoner


@op("reasoner_status", NoInput, ReasonerStatus)
def reasoner_status(brain: Brain, inp: NoInput) -> ReasonerStatus:
    """Whether the configured reasoner answers, the models it serves, the latency of one
    request, the tokens spent today and the budget left (as ``stats`` shows it)."""
    Reasoner.of(brain.cfg).close()  # none configured: a clear error, not "configured: false"
    return health.reasoner_status(brain)


class BakeoffInput(_Input):
    models: list[str] | None = Field(
        None, max_length=8, description="Model names to compare; the configured one when empty."
    )
    tasks: list[bakeoff.Task] | None = Field(None, description="Tasks to run; all when empty.")
    data: str | None = Field(None, description="A labelled set; the packaged one by default.")
    limit: int | None = Field(None, ge=1, le=1000, description="Only the first items per task.")


@op("reasoner_bakeoff", BakeoffInput, bakeoff.BakeoffReport)
def reasoner_bakeoff(
    brain: Brain, inp: BakeoffInput, progress: ProgressFn | None = None
) -> bakeoff.BakeoffReport:
    """Compare models on the reasoner's tasks (tags, expand, summary, answer) over a labelled
    set: latency p50/p95, JSON validity, agreement with the labels and tokens, per model and
    task."""
    Reasoner.of(brain.cfg).close()  # none configured: a clear error before anything runs
    models = list(dict.fromkeys(inp.models or [])) or [brain.cfg.reasoner.model]
    return bakeoff.run(brain.cfg, models, list(dict.fromkeys(inp.tasks or bakeoff.TASKS)),
                       data=inp.data, limit=inp.limit, progress=progress)  # fmt: skip
