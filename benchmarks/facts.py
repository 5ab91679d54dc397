"""Facts pairing on the 39 docker awesome-compose samples, collected as one library.
Prints one JSON line.

    python benchmarks/facts.py

Counts the service/port assertions (publishes, exposes, listens_on, serves) and all
assertions by confidence, the conflicts and how they were resolved, times the collection
(text pass with the collectors, then a re-collect that must change nothing) and ``ask``, and
checks the acceptance question: "which port does the web service of flask-redis publish"
must answer 8000, confirmed by compose.yaml and README.md with line numbers.
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ms, percentile, unpack
from brainmap import ops

PORT_PREDICATES = {"publishes", "exposes", "listens_on", "serves"}
QUESTION = "which port does the web service of flask-redis publish"


def main() -> None:
    samples = unpack("awesome-compose.tar.gz")
    home = Path(tempfile.mkdtemp(prefix="bm-facts-"))
    brain = ops.Brain(home)
    ops.library_add(brain, ops.LibraryAddInput(name="compose", path=str(samples)))
    started = time.perf_counter()
    # the collectors and the text pass alone: embedding the READMEs is embed_throughput.py's
    first = ops.collect(brain, ops.CollectInput(libraries=["compose"], embed=False)).libraries[0]
    collect_s = time.perf_counter() - started
    facts_before = brain.store.facts.assertions()
    started = time.perf_counter()
    ops.collect(brain, ops.CollectInput(libraries=["compose"], embed=False))
    recollect_s = time.perf_counter() - started
    facts_after = brain.store.facts.assertions()
    same = [(f.subject, f.predicate, f.object, f.confidence) for f in facts_before] == [
        (f.subject, f.predicate, f.object, f.confidence) for f in facts_after
    ]
    port_facts = [f for f in facts_after if f.predicate in PORT_PREDICATES]
    by_confidence = collections.Counter(f.confidence for f in port_facts)
    conflicts = ops.audit(brain, ops.AuditInput(kind="contradict")).conflicts
    services = {f.subject for f in facts_after if f.subject.startswith("service:")}
    times = []
    result = None
    for _ in range(20):
        started = time.perf_counter()
        result = ops.ask(brain, ops.AskInput(question=QUESTION, web=False, root="facts"))
        times.append(time.perf_counter() - started)
    assert result is not None
    top = result.facts[0] if result.facts else None
    evidence = [f"{e.path}:{e.line}" for e in top.evidence] if top else []
    ok = (
        result.answer == "8000"
        and top is not None
        and top.confidence == "confirmed"
        and any(e.startswith("flask-redis/compose.yaml:") for e in evidence)
        and any(e.startswith("flask-redis/README.md:") for e in evidence)
    )
    print(json.dumps({
        "benchmark": "facts",
        "compose_files": len(list(samples.glob("*/compose.y*ml"))),
        "observations": sum(first.observations.values()),
        "observations_by_method": first.observations,
        "services": len(services),
        "service_port_assertions": len(port_facts),
        "confirmed": by_confidence["confirmed"],
        "partial": by_confidence["partial"],
        "hypothesis": by_confidence["hypothesis"],
        "contradicted": by_confidence["contradicted"],
        "all_assertions": dict(collections.Counter(f.confidence for f in facts_after)),
        "conflicts": len(conflicts),
        "conflicts_by_rule": dict(collections.Counter(c.resolved_by or "unresolved"
                                                      for c in conflicts)),
        "collect_s": round(collect_s, 3),
        "recollect_s": round(recollect_s, 3),
        "recollect_identical": same,
        "ask_p50_ms": ms(percentile(times, 0.5)),
        "ask_answer": result.answer,
        "ask_confidence": top.confidence if top else None,
        "ask_evidence": evidence,
        "acceptance": ok,
    }))  # fmt: skip
    brain.close()
    if not ok:
        raise SystemExit("acceptance failed: " + json.dumps(evidence))


if __name__ == "__main__":
    main()
