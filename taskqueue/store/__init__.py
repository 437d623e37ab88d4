"""The store: every read and write of the queue tables, as sans-IO operations.

Each function is a generator that yields :mod:`requests <taskqueue.store.requests>`
(a named statement with its parameters, or a COPY) and returns a
typed result; :mod:`taskqueue.db` runs them on a connection. The modules split
by concern, like the SQL files they use.
"""

from . import admin, enqueue, invariants, leader, pools, registry, tasks
from .requests import Copy, Op, Query, Request

__all__ = ["Copy", "Op", "Query", "Request", "admin", "enqueue", "invariants", "leader", "pools", "registry", "tasks"]
