"""The worker runtime: claim what fits, run handlers, heartbeat, wake on NOTIFY."""

from .worker import Worker

__all__ = ["Worker"]
