"""THE operations table: every operation once, with typed input and output.

Each op is a function ``(brain, input) -> output`` registered with a name, a pydantic input
model and an output type (a dataclass that pydantic can validate and serialise). The CLI, HTTP
and MCP only parse input, call an op and format its output. The modules register their ops in
import order, which is the order of the OpenAPI paths and MCP tools.
"""

from brainmap.ops.core import OPS, Brain, Op, describe_errors, op, served, to_jsonable
from brainmap.ops.facts import AskInput, CollectInput, ask, collect
from brainmap.ops.graph import (
    AuditInput,
    BacklinksInput,
    GitImportInput,
    NeighborsInput,
    RefsInput,
    VerifyInput,
    audit,
    backlinks,
    git_import,
    neighbors,
    refs,
    verify,
)
from brainmap.ops.health import EvalInput, doctor, eval_, gc, init, stats
from brainmap.ops.knowledge import (
    GetInput,
    IngestInput,
    SaveInput,
    SearchInput,
    get,
    ingest,
    save,
    search,
)
from brainmap.ops.libmap import (
    MapLibraryInput,
    MapRecomputeInput,
    get_map,
    map_,
    map_recompute,
    map_text,
)
from brainmap.ops.library import (
    LibraryAddInput,
    LibraryInfo,
    LibraryNameInput,
    NoInput,
    ReindexInput,
    library_add,
    library_list,
    library_remove,
    reindex,
)

__all__ = [
    "OPS", "AskInput", "AuditInput", "BacklinksInput", "Brain", "CollectInput", "EvalInput",
    "GetInput", "GitImportInput", "ask", "collect",
    "IngestInput", "LibraryAddInput", "LibraryInfo", "LibraryNameInput", "NeighborsInput",
    "NoInput", "Op", "RefsInput", "ReindexInput", "SaveInput", "SearchInput", "audit",
    "backlinks", "describe_errors", "doctor", "eval_", "gc", "get", "git_import", "ingest",
    "init", "library_add", "library_list", "library_remove", "neighbors", "op", "refs",
    "reindex", "save", "search", "served", "stats", "to_jsonable", "verify", "VerifyInput",
    "MapLibraryInput", "MapRecomputeInput", "get_map", "map_", "map_recompute", "map_text",
]  # fmt: skip
