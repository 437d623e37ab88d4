"""The asyncio front-end: ``AsyncTaskQueue`` over the same plans, operations and statements as ``TaskQueue``."""

from .queue import AsyncTaskQueue

__all__ = ["AsyncTaskQueue"]
