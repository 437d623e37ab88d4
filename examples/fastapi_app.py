"""A FastAPI service that uses taskqueue: a signup and its welcome mail, enqueued in one transaction.

- The lifespan opens an ``AsyncTaskQueue`` (and migrates it), and runs a
  ``Worker`` with an ``async def`` handler in the same process, on the app's
  own event loop (``worker.run_async``).
- ``POST /signups`` writes the signup row and enqueues its welcome task in
  one transaction (``connection=``): both commit, or neither. A duplicate
  e-mail is a 409 and leaves no task behind.
- The ``welcome`` handler "sends" the mail, marks the row welcomed, and
  returns what it sent, which becomes the task's result.

Run it::

    pip install 'taskqueue[examples]'
    TASKQUEUE_DSN=postgresql://localhost/app uvicorn examples.fastapi_app:app

Its tests, written with taskqueue's pytest plugin, are in
``tests/test_example_fastapi.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from taskqueue import AsyncTaskQueue, Task, Worker
from taskqueue.dsn import to_sqlalchemy_url

metadata = sa.MetaData()
signups = sa.Table(
    "signups",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("email", sa.Text, nullable=False, unique=True),
    sa.Column("welcomed", sa.Boolean, nullable=False, server_default=sa.false()),
)


class SignupIn(BaseModel):
    email: str


def make_worker(engine: AsyncEngine) -> Worker:
    """The service's handlers; tests drain them in-process with ``taskqueue.testing.adrain``."""
    worker = Worker(queues=["welcome"], async_concurrency=20, poll_interval=1.0)

    @worker.handler("welcome")
    async def welcome(task: Task) -> dict[str, Any]:
        await asyncio.sleep(0)  # stands for the mail provider's HTTP call
        async with engine.begin() as conn:
            await conn.execute(signups.update().where(signups.c.id == task.payload["signup_id"]).values(welcomed=True))
        return {"sent_to": task.payload["email"]}

    return worker


def create_app(dsn: str | None = None, *, run_worker: bool = True) -> FastAPI:
    """The app; ``run_worker=False`` leaves the tasks queued (a test drains them itself)."""
    dsn = dsn or os.environ.get("TASKQUEUE_DSN")
    if not dsn:
        raise RuntimeError("set TASKQUEUE_DSN (or pass dsn=) to the service's database")
    engine = create_async_engine(to_sqlalchemy_url(dsn))
    tq = AsyncTaskQueue(dsn)
    worker = make_worker(engine)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with tq:
            await tq.migrate()
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
            running = asyncio.create_task(worker.run_async(tq)) if run_worker else None
            try:
                yield
            finally:
                if running is not None:
                    running.cancel()  # a graceful stop: running handlers finish within the grace period
                    with contextlib.suppress(asyncio.CancelledError):
                        await running
                await engine.dispose()

    app = FastAPI(lifespan=lifespan)
    app.state.tq = tq
    app.state.engine = engine
    app.state.worker = worker

    @app.post("/signups", status_code=201)
    async def create_signup(body: SignupIn) -> dict[str, int]:
        async with engine.connect() as conn:
            try:
                signup_id = (
                    await conn.execute(signups.insert().values(email=body.email).returning(signups.c.id))
                ).scalar_one()
            except sa.exc.IntegrityError:
                await conn.rollback()
                raise HTTPException(409, f"{body.email} has already signed up") from None
            task_id = await tq.enqueue(
                {"signup_id": signup_id, "email": body.email}, queue="welcome", connection=conn
            )
            await conn.commit()  # the row and its task, together
        return {"id": signup_id, "task_id": task_id}

    @app.get("/signups/{signup_id}")
    async def get_signup(signup_id: int) -> dict[str, Any]:
        async with engine.connect() as conn:
            row = (await conn.execute(signups.select().where(signups.c.id == signup_id))).mappings().first()
        if row is None:
            raise HTTPException(404, f"no signup {signup_id}")
        return dict(row)

    @app.get("/tasks/{task_id}")
    async def get_task(task_id: int) -> dict[str, Any]:
        task = await tq.get(task_id)
        if task is None:
            raise HTTPException(404, f"no task {task_id}")
        return {"id": task.id, "state": task.state, "result": task.result}

    return app


def __getattr__(name: str) -> Any:
    """``uvicorn examples.fastapi_app:app`` builds the app from $TASKQUEUE_DSN on first access."""
    if name == "app":
        return create_app()
    raise AttributeError(name)
