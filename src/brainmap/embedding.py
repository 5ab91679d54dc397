"""The embedding pass: a vector for every chunk, from the cache or the model, in batches.

Also what is embedded for a chunk (its entry's title and heading give it context; a long run
of turns a few turns at a time too) and the fault injection points of the crash tests, which
the text pass shares.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brainmap.analysis import estimate_tokens
from brainmap.embedders import MAX_EMBED_CHARS
from brainmap.markdown import is_turns
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


# A unit of a dialogue or diary (one line per turn, up to ``[index] turn_tokens``) is embedded
# whole and also in windows of about this many tokens (two or three turns), each starting at
# the last turn of the one before (a question and its answer share one); a vector search scores
# the unit by the best of its vectors. One turn's answer is lost in the vector of 450 tokens of
# talk: the README gives what it gained on LoCoMo, cross-validated; windows of 150 tokens
# gained less (hybrid recall@5 0.827 against 0.844), with fewer vectors.
WINDOW_TOKENS = 100


def vector_texts(title: str, aliases: list[str], heading: str, text: str) -> list[str]:
    """What is embedded for a chunk: :func:`embed_text` of its whole text, then of each of
    its windows when it is a long run of turns (:func:`windows`)."""
    whole = embed_text(title, aliases, heading, text)
    return [whole, *(embed_text(title, aliases, heading, w) for w in windows(text))]


def windows(text: str) -> list[str]:
    """A run of turns longer than a window and a half, in windows of about
    ``WINDOW_TOKENS`` whole lines, each starting at the last line of the one before; no
    windows for any other text (prose, code)."""
    if estimate_tokens(text) <= WINDOW_TOKENS * 3 // 2 or "```" in text or "~~~" in text:
        return []
    lines = [line for line in text.splitlines() if line.strip()]
    if not is_turns(lines):
        return []
    sizes = [estimate_tokens(line) for line in lines]
    out: list[str] = []
    start = 0
    while True:
        end, tokens = start + 1, sizes[start]
        while end < len(lines) and tokens + sizes[end] <= WINDOW_TOKENS:
            tokens, end = tokens + sizes[end], end + 1
        out.append("\n".join(lines[start:end]))
        if end >= len(lines):
            return out
        start = max(end - 1, start + 1)


def text_hash(text: str) -> str:
    """The key of one embedded text in the vector cache."""
    return hashlib.sha256(text.encode()).hexdigest()


def embed_hash(title: str, aliases: list[str], heading: str, text: str) -> str:
    """What a chunk's vectors depend on: its vector texts (a chunk of one has its text's
    :func:`text_hash`, the key of its vector in the cache)."""
    return text_hash("\x1e".join(vector_texts(title, aliases, heading, text)))


def cache_keys(store: Store, model: str) -> set[str]:
    """The vector cache's keys of every text the index's chunks embed for ``model`` (a
    chunk's own embedding hash is its key unless it has windows)."""
    keys = store.vectors.embed_hashes()
    for p in store.vectors.windowed_chunks(model):
        keys.update(text_hash(t) for t in vector_texts(p.title, p.aliases, p.heading, p.text))
    return keys


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
            vectors = _vectors_for(group, cache, embedder, model, report, batch_size)
            store.vectors.put(
                model,
                [(p.id, p.library_id, vectors[p.id][0]) for p in group if p.id in vectors],
                {cid: b"".join(rows[1:]) for cid, rows in vectors.items() if len(rows) > 1},
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
    batch_size: int,
) -> dict[int, list[bytes]]:
    """The vectors of each chunk (by chunk id) that has them all: its texts' cached vectors,
    then fresh ones, ``batch_size`` texts a model call (one by one if a call fails)."""
    from brainmap.embedders import EmbedderError

    texts_of = {p.id: vector_texts(p.title, p.aliases, p.heading, p.text) for p in group}
    hashes_of = {cid: [text_hash(t) for t in texts] for cid, texts in texts_of.items()}
    chunks_of: dict[str, set[int]] = {}  # the chunks that embed each text
    for cid, hashes in hashes_of.items():
        for h in hashes:
            chunks_of.setdefault(h, set()).add(cid)
    found = cache.get_many(model, list(chunks_of))
    cached = {cid for cid, hashes in hashes_of.items() if all(h in found for h in hashes)}
    report.cached += len(cached)
    # the chunks' whole texts first, then their first windows, ...: a model that fails every
    # text is told down after three chunks, not after the many windows of one
    missing: dict[str, str] = {}
    for i in range(max(map(len, texts_of.values()), default=0)):
        for cid, texts in texts_of.items():
            if i < len(texts) and hashes_of[cid][i] not in found:
                missing.setdefault(hashes_of[cid][i], texts[i])
    batches = list(missing.items())
    for first in range(0, len(batches), batch_size):
        batch = batches[first : first + batch_size]
        try:
            rows = list(zip(batch, embedder.passages([t for _, t in batch]), strict=True))
        except EmbedderError:
            rows, failed = [], set()
            for h, t in batch:
                try:
                    rows.append(((h, t), embedder.passages([t])[0]))
                except EmbedderError:
                    failed |= chunks_of[h]
                    if len(failed) >= 3 and not rows:
                        raise  # nothing goes through: the model or endpoint is down
        fresh = {h: row.astype("float32").tobytes() for (h, _), row in rows}
        if fresh:  # kept at once: what was embedded survives a failure of the next batch
            cache.put_many(model, fresh.items())
            found.update(fresh)
    out = {
        cid: [found[h] for h in hashes]
        for cid, hashes in hashes_of.items()
        if all(h in found for h in hashes)
    }
    report.embedded += len(out) - len(cached)
    report.failed += len(hashes_of) - len(out)
    return out
