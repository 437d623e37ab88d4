"""Helpers for testing code that uses taskqueue: drain a queue in-process, assert what is enqueued.

The fixtures (``tq``, ``taskqueue_database``, ...) come from the pytest plugin
in :mod:`taskqueue.testing.plugin`; docs/testing.md shows both together.
Like the package itself, this module loads SQLAlchemy and psycopg only when a
helper is first used.
"""

from __future__ import annotations
