"""The optional cross-encoder rerank of the first hits (``[rerank]`` in config.toml).

A cross-encoder reads the query and one hit together and scores how well the hit answers it.
The scores of the first ``top_n`` hits reorder them, blended with the first-stage order by
rank position (:func:`blend`), never by raw score: reranker scores are logits, probabilities
or anything else, on no common scale with the fused first-stage score.

Backends (``kind``):

- ``http``: a rerank endpoint at ``url``. The URL's path picks the request:

  - ending ``/v1/rerank`` or ``/v1/reranking`` (or ``/v1``, to which ``/rerank`` is added):
    ``{model, query, documents, top_n}``, the request of llama.cpp server and Jina;
  - ending ``/rerank`` or ``/reranking`` without ``/v1`` (or a bare host, to which
    ``/rerank`` is added): ``{query, texts, truncate}``, the request of TEI, which llama.cpp
    server also takes (a body with ``texts`` gets its TEI answer).

  The answer is read by its shape, whatever was sent: a JSON list of ``{index, score}`` (TEI)
  or an object whose ``results`` are ``{index, relevance_score}`` (llama.cpp, Jina; a
  ``document`` beside them is ignored). Every text must come back exactly once with a finite
  score. The bearer token, when ``api_key_env`` names one, is read from that environment
  variable at each call.
- ``fastembed``: fastembed's ``TextCrossEncoder`` (``pip install 'brainmap[fastembed]'``),
  ``model`` or :data:`FASTEMBED_DEFAULT`; its weights download on first use.

Any failure (refused, timed out, HTTP error, a body that breaks the rules above, fastembed
missing) raises :class:`RerankError`; the caller keeps its first-stage order and says why.
After an HTTP failure the endpoint is not asked again for ``retry_after_s`` (30 s): a search
against an endpoint that is down costs one timeout, not one per query.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from brainmap.config import RERANK_KINDS, RerankSettings
from brainmap.errors import UserError

if TYPE_CHECKING:
    import httpx

# What a reranker reads of one hit or query at most: hits are at most 1,500 characters, and a
# cross-encoder reads 512 tokens (bge-reranker) to 8k; a huge text would only be cut by the
# server (or refused: TEI without --auto-truncate answers 413).
MAX_RERANK_CHARS = 2000
# The k of the rank blend, as in the first stage's RRF: with k far above top_n, the blend
# orders by a weighted mean of the two ranks.
BLEND_K = 60
RETRY_AFTER_S = 30.0
FASTEMBED_DEFAULT = "Xenova/ms-marco-MiniLM-L-6-v2"

Shape = Literal["documents", "texts"]


class RerankError(UserError):
    """The reranker cannot be loaded or did not answer well: keep the first-stage order."""


@dataclass(frozen=True)
class Reranked:
    """The new order of the hits (indexes into the list given, all of them) and the
    reranker's scores of the first ones (``scores[i]`` is the score of text ``i``)."""

    order: list[int]
    scores: list[float]


def blend(n: int, scores: Sequence[float], weight: float, *, k: float = BLEND_K) -> list[int]:
    """Blend a first-stage order with a reranker's scores, by rank position.

    Item ``i`` (0-based, in first-stage order) gets ``(1 - weight) / (k + i + 1) +
    weight / (k + r)``, ``r`` its 1-based rank by the reranker (ties broken by first-stage
    order); equal blends keep the first-stage order. Items from ``len(scores)`` to ``n`` were
    not reranked and keep their places after the reranked ones.

    Args:
        n: How many items the first stage ranked.
        scores: The reranker's scores of the first ``len(scores)`` items, higher is better.
        weight: The reranker's share, in [0, 1]: 0 keeps the first-stage order, 1 takes the
            reranker's.
        k: Damping of the reciprocal ranks.

    Returns:
        The new order: a permutation of ``range(n)``.

    Raises:
        ValueError: more scores than items, a weight outside [0, 1], a score not finite.
    """
    m = len(scores)
    if m > n:
        raise ValueError(f"{m} scores for {n} items")
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight {weight} is not in [0, 1]")
    if not all(math.isfinite(s) for s in scores):
        raise ValueError("a score is not finite")
    by_score = sorted(range(m), key=lambda i: (-scores[i], i))
    second = [0] * m
    for rank, i in enumerate(by_score, 1):
        second[i] = rank
    fused = [(1.0 - weight) / (k + i + 1) + weight / (k + second[i]) for i in range(m)]
    head = sorted(range(m), key=lambda i: (-fused[i], i))
    return head + list(range(m, n))


def endpoint(url: str) -> tuple[str, Shape]:
    """The URL to post to and the request shape it gets (the table of the module's doc)."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    if path.endswith(("/rerank", "/reranking")):
        head = path.rpartition("/")[0]
        shape: Shape = "documents" if head.endswith("/v1") else "texts"
    elif path.endswith("/v1"):
        path, shape = path + "/rerank", "documents"
    else:
        path, shape = path + "/rerank", "texts"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")), shape


class Reranker:
    """Scores texts against a query with the backend of ``[rerank]``; keep one alive to keep
    its connection (or model) warm. Safe to share between threads."""

    def __init__(self, settings: RerankSettings, *, retry_after_s: float = RETRY_AFTER_S) -> None:
        """Nothing is loaded or contacted here; :meth:`scores` does it (and raises)."""
        self.settings = settings
        self.retry_after_s = retry_after_s
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down_reason = ""

    def rerank(self, query: str, texts: Sequence[str]) -> Reranked:
        """Rerank the first ``top_n`` of ``texts`` (first-stage order) and blend.

        Raises:
            RerankError: the backend failed; the order given is still the best one known.
        """
        head = list(texts[: self.settings.top_n])
        scores = self.scores(query, head) if len(head) > 1 else [0.0] * len(head)
        return Reranked(blend(len(texts), scores, self.settings.weight), scores)

    def scores(self, query: str, texts: list[str]) -> list[float]:
        """One finite relevance score per text, in the order of ``texts`` (higher is better).

        Raises:
            RerankError: unreachable, timed out, an HTTP error, an answer that is not JSON,
                misses a text, repeats one, names one that was not sent or has a score that
                is not a finite number; fastembed missing or its model not loadable.
        """
        if not texts:
            return []
        query = query[:MAX_RERANK_CHARS]
        capped = [t[:MAX_RERANK_CHARS] for t in texts]
        kind = self.settings.kind
        if kind == "fastembed":
            return _fastembed_scores(self.settings.model or FASTEMBED_DEFAULT, query, capped)
        if kind != "http":
            raise RerankError(
                f"unknown rerank kind {kind!r}", hint=f"use {' or '.join(RERANK_KINDS)}"
            )
        return self._http_scores(query, capped)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # http

    def _http_scores(self, query: str, texts: list[str]) -> list[float]:
        s = self.settings
        if not s.url:
            raise RerankError("no rerank endpoint", hint="set [rerank] url in config.toml")
        url, shape = endpoint(s.url)
        wait = self._down_until - time.monotonic()
        if wait > 0:
            raise RerankError(f"{self._down_reason} (not asked again for {math.ceil(wait)} s)")
        headers = {"Accept": "application/json", "User-Agent": "brainmap"}
        if s.api_key_env:
            key = os.environ.get(s.api_key_env, "")
            if not key:
                raise RerankError(
                    f"${s.api_key_env} is not set (it holds the rerank endpoint's token)",
                    hint=f"export {s.api_key_env}=... or clear [rerank] api_key_env",
                )
            headers["Authorization"] = f"Bearer {key}"
        body: dict[str, Any]
        if shape == "documents":
            body = {"query": query, "documents": texts, "top_n": len(texts)}
            body["return_documents"] = False  # Jina sends the texts back unless told not to
            if s.model:
                body["model"] = s.model
        else:
            body = {"query": query, "texts": texts, "truncate": True}
        try:
            scores = self._post(url, headers, body, len(texts))
        except RerankError as exc:
            self._down_until = time.monotonic() + self.retry_after_s
            self._down_reason = exc.message
            raise
        return scores

    def _post(self, url: str, headers: dict[str, str], body: Any, n: int) -> list[float]:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.settings.timeout_s)
            client = self._client
        where = f"rerank endpoint {url}"
        try:
            response = client.post(url, json=body, headers=headers)
        except httpx.TimeoutException:
            raise RerankError(f"{where}: no answer within {self.settings.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise RerankError(f"{where}: {type(exc).__name__}: {exc}"[:300]) from None
        if response.status_code != 200:
            detail = " ".join(response.text.split())[:200]
            raise RerankError(
                f"{where}: HTTP {response.status_code}" + (f" {detail}" if detail else "")
            )
        try:
            data = response.json()
        except ValueError:
            raise RerankError(f"{where}: the answer is not JSON") from None
        return _read_scores(data, n, where)


def _read_scores(data: Any, n: int, where: str) -> list[float]:
    """The scores of a TEI list or a ``results`` object, by the index of each text sent."""
    if isinstance(data, list):
        rows, key = data, "score"
    elif isinstance(data, dict) and isinstance(data.get("results"), list):
        rows, key = data["results"], "relevance_score"
    else:
        raise RerankError(f"{where}: the answer has no results (not a rerank endpoint?)")
    if len(rows) != n:
        raise RerankError(f"{where}: {len(rows)} scores for {n} texts")
    scores: list[float | None] = [None] * n
    for row in rows:
        if not isinstance(row, dict):
            raise RerankError(f"{where}: a result is not an object")
        index = row.get("index")
        score = row.get(key, row.get("score"))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise RerankError(f"{where}: result index {index!r} is not one of the {n} texts")
        if scores[index] is not None:
            raise RerankError(f"{where}: text {index} is scored twice")
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise RerankError(f"{where}: the score of text {index} is not a number")
        if not math.isfinite(score):
            raise RerankError(f"{where}: the score of text {index} is {score}")
        scores[index] = float(score)
    return [s for s in scores if s is not None]  # all set: n distinct indexes in range


# fastembed: one model per process, whatever the number of searchers

_fastembed_models: dict[str, Any] = {}
_fastembed_errors: dict[str, RerankError] = {}
_fastembed_lock = threading.Lock()


def _fastembed_model(model: str) -> Any:
    with _fastembed_lock:
        if model in _fastembed_models:
            return _fastembed_models[model]
        if model in _fastembed_errors:  # loading may try a download: once per process
            raise _fastembed_errors[model]
        try:
            from fastembed.rerank.cross_encoder import TextCrossEncoder
        except ImportError:
            error = RerankError(
                "rerank kind fastembed needs the fastembed package, which is not installed",
                hint="pip install 'brainmap[fastembed]', or use kind = \"http\"",
            )
        else:
            try:
                loaded = _fastembed_models[model] = TextCrossEncoder(model_name=model)
                return loaded
            except Exception as exc:  # fastembed raises many types for unknown/unfetchable models
                error = RerankError(
                    f"fastembed cannot load the cross-encoder {model!r}: {exc}"[:400],
                    hint="its weights download on first use: run once with network, "
                    "or pick a model of TextCrossEncoder.list_supported_models()",
                )
        _fastembed_errors[model] = error
        raise error


def _fastembed_scores(model: str, query: str, texts: list[str]) -> list[float]:
    encoder = _fastembed_model(model)
    try:
        scores = [float(s) for s in encoder.rerank(query, texts)]
    except Exception as exc:  # an ONNX runtime failure must not break the search
        raise RerankError(f"fastembed cross-encoder {model!r} failed: {exc}"[:400]) from exc
    if len(scores) != len(texts) or not all(math.isfinite(s) for s in scores):
        raise RerankError(f"fastembed cross-encoder {model!r} gave bad scores")
    return scores
