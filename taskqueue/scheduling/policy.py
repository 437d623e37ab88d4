"""The three scheduling policies as one pure function: what to start now, what to hold back for.

Inputs are what a worker knows at a claim round: its capacity, its running
tasks with their expected ends, and the waiting tasks at the head of the queue
in claim order ((priority, id), as the database's claim walks them). The
answer is the set of tasks to start and the claim budget ``available`` that
makes the database's exact-fit claim take exactly those: the claim walks the
same order and takes each task that fits what is left of ``available``, so a
task the policy wants skipped is skipped by lowering the budget below its
size (the tasks taken before it still fit). A policy never adds to the
budget, so a claim can never take more than the free capacity, and a
reservation never takes a pool slot: it is only capacity left unused.

- ``greedy``: every task that fits, in order (the claim as it is). A large
  task can wait forever behind a stream of small ones.
- ``strict`` (seed 003's naive scheduling): tasks in order until the first
  that does not fit; nothing after it starts until it has started.
- ``backfill`` (seed 003's look-ahead, EASY backfilling): the first task that
  does not fit gets a reservation at the earliest time it fits, from the
  running tasks' expected ends (:class:`~.profile.Profile`); later tasks
  start now only if their own rectangle (required x estimate) fits around the
  reservation, so they cannot delay it. ``depth`` > 1 reserves for that many
  blocked tasks (conservative backfilling); the seed reserves for every
  waiting high-priority job.

A reservation whose start time has passed while its task still does not fit
(an estimate was too short) is *overdue*: the worker then holds back as
``strict`` does, which keeps the wait bounded even when estimates are wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import POLICIES
from .profile import Profile


@dataclass(frozen=True, slots=True)
class Head:
    """A waiting task, as the planner needs it."""

    key: int
    required: int
    estimate: float  # expected run time, seconds (or ticks in the simulator)
    reserved_elsewhere: bool = False  # another live worker holds capacity back for it
    overdue: bool = False  # this worker reserved it and its expected start has passed


@dataclass(frozen=True, slots=True)
class Reserved:
    key: int
    required: int
    start: float  # when it is expected to fit


@dataclass(frozen=True, slots=True)
class Plan:
    start: tuple[int, ...]  # keys of the tasks to start now, in claim order
    available: int  # the claim budget that takes exactly those
    reservations: tuple[Reserved, ...] = ()
    holding: bool = False  # held back strictly (strict policy, or an overdue reservation)

    @property
    def reservation(self) -> Reserved | None:
        """The reservation a worker records in the registry (the first)."""
        return self.reservations[0] if self.reservations else None


def plan(
    policy: str,
    capacity: int,
    now: float,
    running: Sequence[tuple[int, float]],
    heads: Sequence[Head],
    *,
    truncated: bool = False,
    depth: int = 1,
) -> Plan:
    """Decide one claim round.

    ``running`` holds (required, expected end) of the running tasks.
    ``heads`` are the waiting tasks in claim order; ``truncated`` says more
    wait behind them, which the claim could reach with budget left over (then
    only capacity that no reservation needs, ever, is offered for them).
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}")
    profile = Profile(now, capacity, running)
    spare = max(0, profile.spare[0])
    if policy == "greedy":
        picked = claim_order_pick([h.required for h in heads], spare)
        return Plan(tuple(heads[i].key for i in picked), spare)

    remaining = spare  # what the claim has left when it reaches the current head
    taken = 0
    holding = False
    start: list[int] = []
    reservations: list[Reserved] = []
    for head in heads:
        if head.required > capacity:
            continue  # never fits this worker; the claim skips it too (budget <= capacity)
        if head.required <= remaining:
            if head.required == 0 or not reservations or profile.fits(head.required, now, head.estimate):
                start.append(head.key)
                profile.take(head.required, now, head.estimate)
                remaining -= head.required
                taken += head.required
            else:
                remaining = head.required - 1  # the claim must skip it: it would delay a reservation
            continue
        if holding or head.reserved_elsewhere:
            continue  # held back already, or another worker holds back for it
        at = profile.earliest(head.required, head.estimate)
        if policy == "strict" or head.overdue:
            # Nothing after it starts (tasks of size 0 aside: they cannot delay it).
            reservations.append(Reserved(head.key, head.required, now if at is None else at))
            holding, remaining = True, 0
        elif len(reservations) < depth and at is not None:
            profile.take(head.required, at, head.estimate)
            reservations.append(Reserved(head.key, head.required, at))
    if truncated and reservations:
        remaining = min(remaining, max(0, profile.floor(now)))
    return Plan(tuple(start), taken + remaining, tuple(reservations), holding)


def claim_order_pick(required: Sequence[int], available: int) -> list[int]:
    """Indexes the database's exact-fit claim takes from tasks in claim order with this budget.

    The simulator's stand-in for ``claim_many(available=...)``.
    """
    picked = []
    for i, r in enumerate(required):
        if r <= available:
            picked.append(i)
            available -= r
    return picked
