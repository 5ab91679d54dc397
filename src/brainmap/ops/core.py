"""The operations table and the open brain every op works on."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    TypeAdapter,
    model_validator,
)

from brainmap.ops.brain import Brain

__all__ = ["OPS", "Brain", "Caller", "Op", "describe_errors", "op", "served", "to_jsonable"]

#: Which interface runs an op. The network ones (``http``, ``mcp``) may reach only what the
#: brain serves; ``cli`` (also hooks and direct calls) runs as the user, with their files.
Caller = Literal["cli", "http", "mcp"]

# the op modules, in the order their ops are listed over HTTP and MCP
MODULES = (
    "facts", "graph", "library", "health", "knowledge", "usage", "notes", "libmap", "agent", "reasoning",
    "team",
)  # fmt: skip


@dataclass(frozen=True)
class Op:
    """One operation: the unit every interface exposes.

    Ops with ``methods`` are served over HTTP at ``path`` and as the MCP tool ``tool`` (the
    path's first segment unless named); the others (administration, and the reads only the
    web GUI's pages make) are called in process by the CLI and the GUI.
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
    #: a note's write that a server hands to its writer process (:mod:`brainmap.writeworker`)
    handed: bool = False

    def run(self, brain: Brain, inp: BaseModel, caller: Caller) -> Any:
        """Run the op for an interface; only ops with a ``caller`` parameter are told which
        (those that read files the caller names, and must refuse some to the network). A
        handed write goes to the brain's writer process when one runs."""
        worker = brain.write_worker
        if self.handed and worker is not None:
            from brainmap.writeworker import Unavailable

            data = inp.model_dump(mode="json")
            visible = brain.store.db.visible  # a team user's view: the child's reads see it too
            view = None if visible is None else sorted(visible)
            try:
                output = worker.run(self.name, data, caller, view)
            except Unavailable:
                pass  # no writer process: written here
            else:
                return _adapter(self.output).validate_python(output)
        if "caller" in inspect.signature(self.func).parameters:
            return self.func(brain, inp, caller=caller)
        return self.func(brain, inp)

    @property
    def tool(self) -> str:
        # MCP tool names are snake_case whatever the HTTP path's style (git-import -> git_import)
        return self.tool_name or self.path.strip("/").split("/")[0].replace("-", "_")


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
    handed: bool = False,
) -> Callable[..., Any]:
    """Register a function in the operations table; its docstring is its description."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        description = inspect.getdoc(func) or name
        OPS[name] = Op(name, func, input, output, description, writes, methods, path or f"/{name}",
                       tool, in_query, handed)  # fmt: skip
        return func

    return register


def served() -> list[Op]:
    """The ops that HTTP and MCP expose, in table order."""
    load_all()  # the table fills as its modules are imported
    return [o for o in OPS.values() if o.methods]


_adapters: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    if kind not in _adapters:
        _adapters[kind] = TypeAdapter(kind)
    return _adapters[kind]


def to_jsonable(value: Any) -> Any:
    """Serialise an op's output (dataclasses, lists of them) to JSON-compatible data."""
    return _adapter(type(value)).dump_python(value, mode="json")


def to_json(value: Any, output: Any) -> bytes:
    """An op's output as JSON text, serialised by its declared type ``output`` in one pass
    (no intermediate dicts: what HTTP sends)."""
    return _adapter(output).dump_json(value)


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


def load_all() -> None:
    """Import every op module, so that the table is complete, and put it in ``MODULES``
    order (modules register as they are imported, and a CLI call imports only its own)."""
    for module in MODULES:
        importlib.import_module(f"brainmap.ops.{module}")
    rank = {f"brainmap.ops.{module}": i for i, module in enumerate(MODULES)}
    ordered = sorted(OPS.values(), key=lambda o: rank[o.func.__module__])  # stable: in-module order
    if list(OPS.values()) != ordered:
        OPS.clear()
        OPS.update((o.name, o) for o in ordered)
