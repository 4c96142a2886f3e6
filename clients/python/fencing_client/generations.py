"""The generations of the lock services, kept in PostgreSQL: one row per
service in ``fencing_lock_generations``.  A lock service's number is paired
with its generation, read right after the lock is taken and kept for the
whole grant (never read again at write time); raising the generation after
a lock service lost its numbers puts every later grant above every earlier
one."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from psycopg import sql

from ._db import Database, SourceDb

GENERATIONS_TABLE = "fencing_lock_generations"
SERVICES = ("etcd", "zookeeper", "redis")


def _ident(table: str) -> sql.Composable:
    return sql.Identifier(*table.split("."))


@contextlib.contextmanager
def _using(db: Database | SourceDb) -> Iterator[SourceDb]:
    if isinstance(db, SourceDb):
        yield db
        return
    own = SourceDb(db)
    try:
        yield own
    finally:
        own.close()


def ensure_generation_table(db: Database, *services: str,
                            table: str = GENERATIONS_TABLE) -> None:
    """Create ``table (service text PRIMARY KEY, generation bigint NOT NULL)``
    when it is missing, and a row with generation 0 for each service named
    (by default etcd, zookeeper and redis) that has none."""
    t = _ident(table)
    with _using(db) as d, d.transaction() as conn:
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (service text PRIMARY KEY, "
            "generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0))").format(t))
        for s in services or SERVICES:
            conn.execute(sql.SQL("INSERT INTO {} (service, generation) VALUES (%s, 0) "
                                 "ON CONFLICT (service) DO NOTHING").format(t), (s,))


def read_generation(db: Database | SourceDb, service: str, table: str = GENERATIONS_TABLE) -> int:
    """The service's generation, in a statement of its own."""
    with _using(db) as d:
        row: Any = d.query_one(sql.SQL("SELECT generation FROM {} WHERE service = %s")
                               .format(_ident(table)), (service,))
    if row is None:
        raise LookupError(f"no generation for service {service!r} in {table}: "
                          f"call ensure_generation_table(db, {service!r}) once, or "
                          f"INSERT INTO {table} VALUES ({service!r}, 0)")
    return int(row[0])


def raise_generation(db: Database, service: str, by: int = 1,
                     table: str = GENERATIONS_TABLE) -> int:
    """Raise a service's generation (after it lost or rolled back its
    numbers, before its clients come back); the new generation."""
    if by < 1:
        raise ValueError("a generation is only ever raised: by 1 or more")
    with _using(db) as d, d.transaction() as conn:
        row = conn.execute(sql.SQL("UPDATE {} SET generation = generation + %s "
                                   "WHERE service = %s RETURNING generation")
                           .format(_ident(table)), (by, service)).fetchone()
    if row is None:
        raise LookupError(f"no generation for service {service!r} in {table}")
    return int(row[0])
