"""The PostgreSQL + pgvector backend, for a team that shares one brain (DESIGN: one package
owns SQL; this is its second backend). psycopg is imported only when a connection opens:
``pip install 'brainmap[postgres]'``.
"""

from brainmap.store.postgres.database import (
    PgDatabase,
    ServerReport,
    connect,
    is_postgres_url,
    server_report,
)
from brainmap.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION, migrate, redact

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PgDatabase",
    "ServerReport",
    "connect",
    "is_postgres_url",
    "migrate",
    "redact",
    "server_report",
]
