"""Advisory locks: the maintenance leader's session lock, and the migration lock.

Statements: ``leader.sql``.
"""

from __future__ import annotations

from .requests import Op, execute, scalar


def try_advisory_lock(key: int) -> Op[bool]:
    return bool((yield from scalar("try_advisory_lock", key=key)))


def advisory_unlock(key: int) -> Op[bool]:
    return bool((yield from scalar("advisory_unlock", key=key)))


def holds_advisory_lock(key: int) -> Op[bool]:
    return bool((yield from scalar("holds_advisory_lock", key=key)))


def set_idle_session_timeout(milliseconds: int) -> Op[None]:
    yield from execute("set_idle_session_timeout", value=f"{int(milliseconds)}ms")


def advisory_xact_lock(key: int) -> Op[None]:
    yield from execute("advisory_xact_lock", key=key)
