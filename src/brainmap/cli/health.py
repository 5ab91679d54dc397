"""CLI commands that report on and repair the brain: stats, doctor, gc, eval.

Commands on the ``brainmap`` group of :mod:`brainmap.cli.app` (imported by :mod:`brainmap.cli.main`); thin over ``brainmap.ops``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from brainmap.cli.app import cli
from brainmap.cli.common import console, json_option, open_brain, print_json, validate

if TYPE_CHECKING:
    from brainmap.ops.health import ReasonerStatus
    from brainmap.usage import UsageSummary, UsedEntry


def _reasoner_line(status: ReasonerStatus) -> str:
    if not status.configured:
        return "none configured (deterministic paths)"
    spent = (
        f"{status.tokens_today:,} of {status.budget:,} tokens today ({status.calls_today} calls)"
    )
    if not status.answers:
        return f"{status.model} at {status.url}: not answering ({status.error}); {spent}"
    return f"{status.model} at {status.url}: answers in {status.latency_ms:g} ms; {spent}"


@cli.command()
@json_option
def stats(json_out: bool) -> None:
    """Counts: libraries, entries, chunks, vectors, pending embeddings, sizes, model.

    \b
    Examples:
      brainmap stats
      brainmap stats --json | jq .pending_embeddings
    """
    from brainmap import ops

    r = ops.stats(open_brain(), ops.NoInput())
    if json_out:
        return print_json(r)
    rows = [
        ("home", r.home),
        ("libraries", str(len(r.libraries))),
        *((f"  {lib.name}", f"{lib.entries} entries, {lib.chunks} chunks") for lib in r.libraries),
        ("entries", str(r.entries)),
        ("chunks", str(r.chunks)),
        ("vectors", f"{r.vectors} ({r.pending_embeddings} pending)"),
        ("skipped files", str(r.skipped_files)),
        ("graph", f"{r.graph_nodes} nodes, {r.graph_edges} edges, {r.commits} commits"),
        (
            "facts",
            ", ".join(
                f"{r.facts.get(c, 0)} {c}"
                for c in ("confirmed", "partial", "hypothesis", "contradicted")
            )
            + f" ({r.observations} observations)",
        ),
        ("code files", str(r.code_files)),
        ("model", r.model),
        ("vector search", r.vector_search),
        ("index", f"{r.index}, {r.db_bytes / 1e6:.1f} MB (schema v{r.schema_version})"),
        ("vector cache", f"{r.cache_vectors} vectors, {r.cache_bytes / 1e6:.1f} MB"),
        ("reasoner", _reasoner_line(r.reasoner)),
        *_usage_rows(r.usage),
    ]
    for key, value in rows:
        click.echo(f"{key:<16}{value}")


def _usage_rows(u: UsageSummary) -> list[tuple[str, str]]:
    from brainmap.termsafe import one_line

    if not u.enabled:
        return [("usage", "off ([usage] enabled = false)")]
    if u.error:
        return [("usage", f"unreadable: {one_line(u.error)}")]
    since = f"since {u.since[:10]}" if u.since else "nothing recorded yet"
    rows = [("usage", f"{u.events} events {since}; {u.used_entries} entries used, "
                      f"{u.never_used} never")]  # fmt: skip

    def line(e: UsedEntry) -> str:
        last = f", last {e.last_used[:10]}" if e.last_used else ""
        judged = f", {e.useful}+/{e.not_useful}-" if e.useful or e.not_useful else ""
        return f"{e.hits} hits, {e.gets} gets{judged}{last}  {one_line(f'{e.library}:{e.path}')}"

    rows += [("  most used" if i == 0 else "", line(e)) for i, e in enumerate(u.most_used)]
    rows += [("  least used" if i == 0 else "", line(e)) for i, e in enumerate(u.least_used)]
    return rows


@cli.command()
@json_option
def doctor(json_out: bool) -> None:
    """Check the model, schema, integrity, vectors and files on disk; print each fix.

    Exits with status 1 when a check fails.

    \b
    Examples:
      brainmap doctor
      brainmap doctor --json | jq '.checks[] | select(.ok | not) | .fix'
    """
    from brainmap import ops

    report = ops.doctor(open_brain(), ops.NoInput())
    if json_out:
        print_json(report)
    else:
        from brainmap.termsafe import one_line

        # file and library names go inside these lines: a newline in one must not forge a line
        for check in report.checks:
            click.echo(
                f"{'ok  ' if check.ok else 'FAIL'} {one_line(check.name)}: {one_line(check.detail)}"
            )
            for item in check.items[:50]:
                click.echo(f"       {one_line(item)}")
            if check.fix:
                click.echo(f"       fix: {one_line(check.fix)}")
    if not report.ok:
        sys.exit(1)


@cli.command()
@json_option
def gc(json_out: bool) -> None:
    """Remove orphans, unconfigured libraries, old-model vectors, imported commits that HEAD
    no longer reaches (abandoned branches, rewritten history) and unused cache; vacuum.

    \b
    Examples:
      brainmap gc
      brainmap library remove old-docs && brainmap gc --json
    """
    from brainmap import ops

    r = ops.gc(open_brain(), ops.NoInput())
    if json_out:
        return print_json(r)
    click.echo(
        f"removed {len(r.libraries_removed)} libraries, {r.orphan_rows} orphan rows, "
        f"{r.old_model_vectors} old-model vectors, {r.unreachable_commits} unreachable commits, "
        f"{r.cache_entries_removed} cache entries"
    )
    if r.cache_kept_because:
        click.echo(f"vector cache kept whole: {r.cache_kept_because}")
    click.echo(f"size {r.bytes_before / 1e6:.1f} MB -> {r.bytes_after / 1e6:.1f} MB")


@cli.command("eval")
@click.argument("golden", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--mode",
    "-m",
    multiple=True,
    type=click.Choice(["hybrid", "bm25", "vector"]),
    help="Only these modes (repeatable).",
)
@click.option(
    "--compare",
    type=click.Path(dir_okay=False, path_type=Path),
    help="An earlier `eval --json` output: exit 1 if a metric fell.",
)
@click.option(
    "--tolerance",
    type=float,
    default=0.02,
    show_default=True,
    help="Allowed fall of a metric with --compare.",
)
@json_option
def eval_cmd(golden: Path, mode: tuple[str, ...], compare: Path | None, tolerance: float, json_out: bool) -> None:  # fmt: skip
    """Measure retrieval quality on GOLDEN: recall@5, recall@10, MRR, nDCG@10 per mode.

    \b
    Example:
      brainmap eval tests/golden.yaml --json > base.json
      brainmap eval tests/golden.yaml --compare base.json
    """
    from brainmap import ops

    inp = validate(
        ops.EvalInput, golden=str(golden), modes=list(mode) or None,
        compare=str(compare) if compare else None, tolerance=tolerance,
    )  # fmt: skip
    report = ops.eval_(open_brain(), inp)
    if json_out:
        print_json(report)
    else:
        from rich.table import Table

        table = Table(
            "mode", "recall@5", "recall@10", "MRR", "nDCG@10", title=f"{report.queries} queries"
        )
        for name, m in report.modes.items():
            table.add_row(
                name, *(f"{m[k]:.3f}" for k in ("recall@5", "recall@10", "mrr", "ndcg@10"))
            )
        console().print(table)
        for line in report.regressions:
            click.echo(f"regression: {line}", err=True)
    if report.regressions:
        sys.exit(1)
