"""The only package with SQL (DESIGN.md): connections and schema, the index, the vector cache.

Two SQLite files live in the home: ``brain.db`` (the disposable index) and ``vectors.db``
(the embedding cache keyed by model id and text hash, which survives a rebuild of the index).
The index is a :class:`Store`: one :class:`Database` (the connection, ``write()``) and its
repositories by kind: ``store.entries``, ``store.vectors``, ``store.graph``, ``store.facts``,
``store.maps``.
"""

from apsw import BusyError as DatabaseBusyError
from apsw import Error as DatabaseError

from brainmap.store.cache import VectorCache
from brainmap.store.database import Database
from brainmap.store.entries import EntryRepo
from brainmap.store.facts import FACTS_ROOT, FactRepo
from brainmap.store.graph import ALIAS_OF, AUTHORED_BY, HAS_VERSION, REFERENCES, GraphRepo
from brainmap.store.index import Store
from brainmap.store.libmap import MapBlockRow, MapRepo, MapVectors, NewBlock
from brainmap.store.records import (
    ChunkRecord,
    CodeFileRecord,
    EdgeRecord,
    EdgeRow,
    EntryRecord,
    EntryState,
    FactRow,
    Filters,
    Graph,
    HitRow,
    LibraryRow,
    NodeRecord,
    ObservationRecord,
    PendingChunk,
    source_of,
    this_machine,
)
from brainmap.store.schema import BUSY_TIMEOUT_MS, PRAGMAS, SCHEMA_VERSION, connect, slug_of
from brainmap.store.usage import EntryUsage, IndexedEntry, UsageEvent, UsageStore, indexed_entries
from brainmap.store.vectors import VectorRepo

__all__ = [
    "ALIAS_OF",
    "AUTHORED_BY",
    "BUSY_TIMEOUT_MS",
    "HAS_VERSION",
    "REFERENCES",
    "CodeFileRecord",
    "EdgeRecord",
    "EdgeRow",
    "Graph",
    "NodeRecord",
    "ObservationRecord",
    "FactRow",
    "FACTS_ROOT",
    "slug_of",
    "PRAGMAS",
    "SCHEMA_VERSION",
    "ChunkRecord",
    "Database",
    "DatabaseBusyError",
    "DatabaseError",
    "EntryRepo",
    "FactRepo",
    "GraphRepo",
    "MapRepo",
    "VectorRepo",
    "EntryRecord",
    "EntryState",
    "Filters",
    "HitRow",
    "LibraryRow",
    "MapBlockRow",
    "MapVectors",
    "NewBlock",
    "PendingChunk",
    "source_of",
    "this_machine",
    "Store",
    "VectorCache",
    "EntryUsage",
    "IndexedEntry",
    "UsageEvent",
    "UsageStore",
    "indexed_entries",
    "connect",
]
