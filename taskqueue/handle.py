"""What both front-ends (``TaskQueue`` and ``AsyncTaskQueue``) hold, checked once: schema, DSN, channel, counters."""

from __future__ import annotations

from .counters import Counters
from .dsn import resolve_dsn, to_libpq
from .errors import ValidationError
from .schema import check_schema_name, notify_channel


class QueueSettings:
    """The settings of a queue handle; the front-end adds a runner for its kind of I/O."""

    def __init__(self, dsn: str | None, schema: str, poll_only: bool) -> None:
        self.schema = check_schema_name(schema)
        self.dsn = to_libpq(resolve_dsn(dsn))
        self.channel = notify_channel(self.schema)
        if not isinstance(poll_only, bool):
            raise ValidationError("poll_only", f"must be a bool, got {type(poll_only).__name__}")
        #: Behind PgBouncer in transaction mode: no LISTEN, no prepared statements (workers poll).
        self.poll_only = poll_only
        #: What this handle did (claims, completions, ...), for taskqueue.metrics.
        self.counters = Counters()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schema={self.schema!r})"
