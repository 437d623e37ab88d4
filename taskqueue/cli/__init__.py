"""The ``taskqueue`` command (also ``python -m taskqueue``)."""

from .app import app, main

__all__ = ["app", "main"]
