"""The embedding pass: a vector for every chunk, from the cache or the model, in batches.

Also what is embedded for a chunk (its entry's title and heading give it context) and the
fault injection points of the crash tests, which the text pass shares.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brainmap.embedders import MAX_EMBED_CHARS
from brainmap.progress import ProgressFn
from brainmap.store import PendingChunk, Store, VectorCache

if TYPE_CHECKING:
    from brainmap.embedders import Embedder


@dataclass
class EmbedReport:
    """What the embedding pass did."""

    model: str
    embedded: int = 0
    cached: int = 0
    failed: int = 0
    pending: int = 0
    seconds: float = 0.0
    error: str | None = None


def title_line(title: str, aliases: list[str]) -> str:
    return f"{title} ({', '.join(aliases)})" if aliases else title


def embed_text(title: str, aliases: list[str], heading: str, text: str) -> str:
    """What is embedded for a chunk: its entry title and heading path give it context.

    Pathological chunks (a huge code block) are cut at ``MAX_EMBED_CHARS``: their vector
    describes their beginning, BM25 still sees all of it.
    """
    head = title_line(title, aliases)
    if heading and heading != title:
        head += "\n" + heading
    return f"{head}\n\n{text}"[:MAX_EMBED_CHARS]


def embed_pending(
    store: Store,
    cache: VectorCache,
    embedder_spec: str,
    library_ids: list[int] | None,
    *,
    entry_ids: list[str] | None = None,
    batch_size: int = 32,
    progress: ProgressFn | None = None,
) -> EmbedReport:
    """Give every chunk of the libraries a vector for the configured model.

    Vectors come from the cache when the same text was embedded before (by any library or
    an earlier index), otherwise from the model in batches. A chunk the model rejects is left
    without a vector (counted in ``failed``) and does not hold up the others.
    """
    from brainmap.embedders import load_embedder, model_id_of

    started = time.monotonic()
    model = model_id_of(embedder_spec)
    report = EmbedReport(model)
    total = store.vectors.pending_count(model, library_ids, entry_ids)
    if not total:
        return report
    embedder = load_embedder(embedder_spec)
    done = 0
    if progress:
        progress("embed", 0, total)
    after: int | None = None
    while page := store.vectors.pending_chunks(
        model, library_ids, limit=batch_size * 8, after=after, entry_ids=entry_ids
    ):
        after = page[-1].id
        for start in range(0, len(page), batch_size):
            group = page[start : start + batch_size]
            vectors = _vectors_for(group, cache, embedder, model, report)
            store.vectors.put(
                model,
                [
                    (p.id, p.library_id, vectors[p.embed_hash])
                    for p in group
                    if p.embed_hash in vectors
                ],
            )
            done += len(group)
            if progress:
                progress("embed", done, max(total, done))
    report.pending = store.vectors.pending_count(model, library_ids, entry_ids)
    report.seconds = time.monotonic() - started
    return report


def _vectors_for(
    group: list[PendingChunk],
    cache: VectorCache,
    embedder: Embedder,
    model: str,
    report: EmbedReport,
) -> dict[str, bytes]:
    """Vectors by embedding hash: cached ones, then fresh ones (one by one if a batch fails)."""
    from brainmap.embedders import EmbedderError

    wanted = {p.embed_hash: p for p in group}
    found = cache.get_many(model, list(wanted))
    report.cached += sum(1 for p in group if p.embed_hash in found)
    missing = [p for h, p in wanted.items() if h not in found]
    if not missing:
        return found
    try:
        pairs = list(zip(missing, _embed(embedder, missing), strict=True))
    except EmbedderError:
        pairs = []
        for position, p in enumerate(missing):
            try:
                pairs.append((p, _embed(embedder, [p])[0]))
            except EmbedderError:
                report.failed += 1
                if position >= 2 and not pairs:
                    raise  # nothing goes through: the model or endpoint is down
    fresh = {p.embed_hash: row.astype("float32").tobytes() for p, row in pairs}
    cache.put_many(model, fresh.items())
    found.update(fresh)
    report.embedded += sum(1 for p in group if p.embed_hash in fresh)
    return found


def _embed(embedder: Embedder, chunks: list[PendingChunk]) -> Any:
    return embedder.passages([embed_text(p.title, p.aliases, p.heading, p.text) for p in chunks])
