#!/usr/bin/python3
"""One client of the PgBouncer part of the locksvc suite: connect (through
the pooler), write pooled row ID in one transaction, print what happened.

    pooled.py DSN MODE TOKEN ID

MODE: set-local (SET LOCAL fencing.token in the transaction), set-token
(fencing.set_token(%s), the token bound as a parameter), none (the write
alone), session-set (SET fencing.token for the session, and no write).
Prints "pid=<server backend> result=<ok|SQLSTATE> fence=<the row's fence>".
"""
import sys

import psycopg

dsn, mode, token, row = sys.argv[1:5]
# no prepared statements: PgBouncer's transaction pooling gives each
# transaction whichever server connection is free
with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
    result = "ok"
    try:
        if mode == "session-set":
            conn.execute(f"SET fencing.token = '{token}'")
        with conn.transaction():
            if mode == "set-local":
                conn.execute(f"SET LOCAL fencing.token = '{token}'")
            elif mode == "set-token":
                conn.execute("SELECT fencing.set_token(%s)", (token,))
            if mode != "session-set":
                conn.execute("UPDATE pooled SET state = %s WHERE id = %s", (mode, row))
    except psycopg.Error as e:
        result = e.sqlstate
    with conn.transaction():
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    fence = conn.execute("SELECT fence::text FROM pooled WHERE id = %s", (row,)).fetchone()[0]
    print(f"pid={pid} result={result} fence={fence}")
