"""The operations table and the open brain every op works on."""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    TypeAdapter,
    model_validator,
)

from brainmap import config as config_mod
from brainmap.config import (
    ensure_home,
    resolve_home,
)
from brainmap.embed import model_id_of
from brainmap.notes import Notes
from brainmap.search import Searcher, VectorIndex
from brainmap.store import Store


class Brain:
    """An open home: its config, and per thread a store and a warm searcher.

    The store (one SQLite connection) and the searcher belong to the thread that asked for
    them, so that a server's worker threads read in parallel; the vector matrix and the
    embedding model are shared by all threads.
    """

    def __init__(self, home: str | Path | None = None) -> None:
        self.home = resolve_home(home)
        self.cfg, self.created = ensure_home(self.home)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._stores: list[Store] = []  # every connection opened, for close()
        self._idle: list[Store] = []  # connections of threads that ended
        self._vectors: VectorIndex | None = None

    @property
    def store(self) -> Store:
        store: Store | None = getattr(self._local, "store", None)
        if store is None:
            with self._lock:
                store = self._idle.pop() if self._idle else None
            if store is None:
                store = Store(self.cfg.db_path)
                with self._lock:
                    self._stores.append(store)
            self._local.store = store
            # server worker threads come and go: a dead thread's connection serves the next
            # thread. (Closing it would not free its file: SQLite keeps the descriptor of a
            # connection closed while others hold locks on the file, until they all close.)
            weakref.finalize(threading.current_thread(), self._idle.append, store)
        return store

    @property
    def searcher(self) -> Searcher:
        searcher: Searcher | None = getattr(self._local, "searcher", None)
        if searcher is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = VectorIndex(model_id_of(self.cfg.embedder))
            searcher = Searcher(self.cfg, self.store, self._vectors)
            self._local.searcher = searcher
        return searcher

    @property
    def notes(self) -> Notes:
        return Notes(self.cfg, self.searcher)

    def save_config(self) -> None:
        config_mod.save(self.cfg)

    def close(self) -> None:
        """Close every thread's connection (call when no operation is running)."""
        with self._lock:
            stores, self._stores, self._idle = self._stores, [], []
        for store in stores:
            store.close()
        self._local = threading.local()

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Op:
    """One operation: the unit every interface exposes.

    Ops with ``methods`` are served over HTTP at ``path`` and as the MCP tool ``tool`` (the
    path's first segment unless named); the others (administration) belong to the CLI only.
    """

    name: str
    func: Callable[..., Any]
    input: type[BaseModel]
    output: Any
    description: str
    writes: bool
    methods: tuple[str, ...]
    path: str
    tool_name: str | None = None
    in_query: bool = False  # a POST takes its input as query parameters, not a JSON body

    @property
    def tool(self) -> str:
        return self.tool_name or self.path.strip("/").split("/")[0]


OPS: dict[str, Op] = {}


def op(
    name: str,
    input: type[BaseModel],
    output: Any,
    *,
    writes: bool = False,
    methods: tuple[str, ...] = (),
    path: str | None = None,
    tool: str | None = None,
    in_query: bool = False,
) -> Callable[..., Any]:
    """Register a function in the operations table; its docstring is its description."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        description = inspect.getdoc(func) or name
        OPS[name] = Op(name, func, input, output, description, writes, methods, path or f"/{name}",
                       tool, in_query)  # fmt: skip
        return func

    return register


def served() -> list[Op]:
    """The ops that HTTP and MCP expose, in table order."""
    return [o for o in OPS.values() if o.methods]


_adapters: dict[Any, TypeAdapter[Any]] = {}


def to_jsonable(value: Any) -> Any:
    """Serialise an op's output (dataclasses, lists of them) to JSON-compatible data."""
    kind = type(value)
    if kind not in _adapters:
        _adapters[kind] = TypeAdapter(kind)
    return _adapters[kind].dump_python(value, mode="json")


class _Input(BaseModel):
    # defer_build: a CLI run validates one model; building all schemas at import costs 40 ms
    model_config = ConfigDict(extra="forbid", defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _no_lone_surrogates(cls, data: Any) -> Any:
        """JSON can carry half a UTF-16 pair; no file, index or model can store it."""
        for value in data.values() if isinstance(data, dict) else ():
            for text in value if isinstance(value, list) else [value]:
                if isinstance(text, str):
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError:
                        raise ValueError("text contains a lone UTF-16 surrogate") from None
        return data


def describe_errors(errors: Sequence[Any]) -> str:
    """One line for pydantic (or FastAPI) validation errors: the first problem of each field."""
    seen: dict[str, str] = {}
    for err in errors:
        where = ".".join(str(p) for p in err["loc"] if p != "body") or "input"
        seen.setdefault(where.split(".")[0], f"{where}: {err['msg']}")
    return "; ".join(seen.values()) or "invalid input"
