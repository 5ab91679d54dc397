"""THE operations table: every operation once, with typed input and output.

Each op is a function ``(brain, input) -> output`` registered with a name, a pydantic input
model and an output type (a dataclass that pydantic can validate and serialise). The CLI, HTTP
and MCP only parse input, call an op and format its output. The modules register their ops as
they are imported; ``core.load_all`` imports them all and orders the table by
``core.MODULES``, the order of the OpenAPI paths and MCP tools.

Names load lazily: ``from brainmap.ops import search`` imports the module that defines it and
what it needs, no more (every CLI call and every hook is a new process); ``OPS`` and
``served`` load the whole table first.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "brain": ("Brain",),
    "core": ("OPS", "Op", "describe_errors", "op", "served", "to_json", "to_jsonable"),
    "facts": ("AskInput", "CollectInput", "LibraryFactsInput", "ask", "collect",
              "library_facts"),
    "graph": ("AuditInput", "BacklinksInput", "GitImportInput", "HopsInput", "NeighborsInput",
              "RefsInput", "VerifyInput", "audit", "backlinks", "git_import", "hops", "neighbors",
              "refs", "verify"),
    "health": ("EvalInput", "doctor", "eval_", "gc", "init", "stats"),
    "knowledge": ("GetInput", "SearchInput", "get", "search"),
    "usage": ("FeedbackInput", "PruneInput", "UsageReportInput", "feedback", "prune",
              "usage_report"),
    "notes": ("IngestInput", "SaveInput", "SupersedeInput", "ingest", "save", "supersede"),
    "libmap": ("MapInput", "MapLibraryInput", "MapRecomputeInput", "get_map", "map_", "map_blocks",
               "map_recompute", "map_text"),
    "reasoning": ("BakeoffInput", "reasoner_bakeoff", "reasoner_status"),
    "library": ("LibraryAddInput", "LibraryInfo", "LibraryNameInput", "NoInput", "ReindexInput",
                "SyncInput", "library_add", "library_list", "library_remove", "read_with", "reindex",
                "sync"),
    "agent": ("DiaryRollupInput", "DiarySummarizeInput", "HooksInput", "HooksRemoveInput", "HooksStatusInput",
              "diary_rollup", "diary_summarize", "hooks_install", "hooks_status",
              "hooks_uninstall", "DiaryIndexInput", "DiaryTextInput", "diary_index",
              "diary_text"),
    "team": ("GrantInput", "RevokeInput", "TokenCreateInput", "TokenListInput",
             "TokenRevokeInput", "UserAddInput", "UserInput", "WriteLogInput", "token_create",
             "token_list", "token_revoke", "user_add", "user_grant", "user_list", "user_remove",
             "user_revoke", "write_log"),
}  # fmt: skip
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [
    "AskInput", "AuditInput", "BacklinksInput", "BakeoffInput", "Brain", "CollectInput",
    "DiaryRollupInput", "DiarySummarizeInput",
    "EvalInput", "GetInput", "GitImportInput", "HooksInput", "HooksRemoveInput",
    "HooksStatusInput", "IngestInput", "LibraryAddInput",
    "LibraryInfo", "LibraryNameInput", "MapInput", "MapLibraryInput", "MapRecomputeInput", "NeighborsInput",
    "NoInput", "OPS", "Op", "RefsInput", "ReindexInput", "SaveInput", "SearchInput",
    "VerifyInput", "ask", "audit", "backlinks", "collect", "describe_errors", "diary_rollup",
    "diary_summarize", "doctor", "eval_", "gc", "get", "get_map", "git_import", "hooks_install", "hooks_status",
    "hooks_uninstall", "ingest", "init", "library_add", "library_list", "library_remove", "map_",
    "map_recompute", "map_text", "neighbors", "op", "reasoner_bakeoff", "reasoner_status",
    "read_with", "refs", "reindex", "save", "search", "served", "SupersedeInput", "supersede",
    "stats", "to_json", "to_jsonable", "verify", "SyncInput", "sync",
    "FeedbackInput", "PruneInput", "feedback", "prune",
    "HopsInput", "LibraryFactsInput", "hops", "library_facts", "map_blocks",
    "DiaryIndexInput", "DiaryTextInput", "UsageReportInput", "diary_index", "diary_text",
    "usage_report",
    "GrantInput", "RevokeInput", "TokenCreateInput", "TokenListInput", "TokenRevokeInput",
    "UserAddInput", "UserInput", "WriteLogInput", "token_create", "token_list", "token_revoke",
    "user_add", "user_grant", "user_list", "user_remove", "user_revoke", "write_log",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'brainmap.ops' has no attribute {name!r}")
    if name in ("OPS", "served"):
        from brainmap.ops.core import load_all

        load_all()
    value = getattr(importlib.import_module(f"brainmap.ops.{module}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from brainmap.ops.agent import (
        DiaryIndexInput,
        DiaryRollupInput,
        DiarySummarizeInput,
        DiaryTextInput,
        HooksInput,
        HooksRemoveInput,
        HooksStatusInput,
        diary_index,
        diary_rollup,
        diary_summarize,
        diary_text,
        hooks_install,
        hooks_status,
        hooks_uninstall,
    )
    from brainmap.ops.brain import Brain
    from brainmap.ops.core import OPS, Op, describe_errors, op, served, to_json, to_jsonable
    from brainmap.ops.facts import (
        AskInput,
        CollectInput,
        LibraryFactsInput,
        ask,
        collect,
        library_facts,
    )
    from brainmap.ops.graph import (
        AuditInput,
        BacklinksInput,
        GitImportInput,
        HopsInput,
        NeighborsInput,
        RefsInput,
        VerifyInput,
        audit,
        backlinks,
        git_import,
        hops,
        neighbors,
        refs,
        verify,
    )
    from brainmap.ops.health import EvalInput, doctor, eval_, gc, init, stats
    from brainmap.ops.knowledge import GetInput, SearchInput, get, search
    from brainmap.ops.libmap import (
        MapInput,
        MapLibraryInput,
        MapRecomputeInput,
        get_map,
        map_,
        map_blocks,
        map_recompute,
        map_text,
    )
    from brainmap.ops.library import (
        LibraryAddInput,
        LibraryInfo,
        LibraryNameInput,
        NoInput,
        ReindexInput,
        SyncInput,
        library_add,
        library_list,
        library_remove,
        read_with,
        reindex,
        sync,
    )
    from brainmap.ops.notes import IngestInput, SaveInput, ingest, save
    from brainmap.ops.reasoning import BakeoffInput, reasoner_bakeoff, reasoner_status
    from brainmap.ops.team import (
        GrantInput,
        RevokeInput,
        TokenCreateInput,
        TokenListInput,
        TokenRevokeInput,
        UserAddInput,
        UserInput,
        WriteLogInput,
        token_create,
        token_list,
        token_revoke,
        user_add,
        user_grant,
        user_list,
        user_remove,
        user_revoke,
        write_log,
    )
    from brainmap.ops.usage import (
        FeedbackInput,
        PruneInput,
        UsageReportInput,
        feedback,
        prune,
        usage_report,
    )
