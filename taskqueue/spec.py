"""Validation of user input into frozen specs, before any SQL runs.

Everything that reaches :mod:`taskqueue.store` has passed through here, so the
store can trust its arguments and a bad batch is rejected whole.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ValidationError
from .task import ORDERS, STATES, EnqueueSpec, Order, TaskState

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
MAX_NAME_LENGTH = 200
#: Largest accepted payload, measured as its compact JSON encoding in UTF-8.
MAX_PAYLOAD_BYTES = 1024 * 1024
#: Largest accepted error text; longer texts are cut, never rejected, because
#: they come from exceptions the caller does not control.
MAX_ERROR_LENGTH = 10_000
MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600.0
MAX_LEASE_SECONDS = 7 * 24 * 3600.0

ENQUEUE_KEYS = EnqueueSpec.__required_keys__ | EnqueueSpec.__optional_keys__


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """A validated task, ready to insert. ``payload_json`` is the encoded payload."""

    payload_json: str
    queue: str
    priority: int
    required: int
    pool: str | None
    run_at: dt.datetime | None
    delay: float | None
    max_attempts: int
    dedupe_key: str | None
    estimate: float | None = None  # expected run time in seconds; None: the queue's learnt estimate


#: One encoder for every payload: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_SCALARS = frozenset({str, int, float, bool, type(None)})
_CONTAINERS = frozenset({dict, list, tuple})
#: Characters a name may not hold: C0 controls, DEL, and lone surrogates.
_BAD_NAME_CHAR = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
_CONTROL_CHAR = re.compile("[\x00-\x1f\x7f]")


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_json(value: Any, path: str, depth: int = 0) -> None:
    if depth > 100:
        raise ValidationError(path, "nested deeper than 100 levels")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(path, "strings may not contain \\u0000 (PostgreSQL jsonb rejects it)")
        if _has_surrogate(value):
            raise ValidationError(path, "strings may not contain unpaired surrogates (not encodable as UTF-8)")
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(path, f"{value!r} is not valid JSON (NaN and Infinity are rejected)")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(path, f"object keys must be str, got {type(key).__name__} {key!r}")
            if "\x00" in key:
                raise ValidationError(path, "object keys may not contain \\u0000")
            if _has_surrogate(key):
                raise ValidationError(path, "object keys may not contain unpaired surrogates")
            _check_json(item, f"{path}.{key}", depth + 1)
        return
    raise ValidationError(path, f"{type(value).__name__} is not JSON (use dict, list, str, int, float, bool or None)")


def _plain_json(value: Any, depth: int = 0) -> bool:
    """True when the encoder renders ``value`` unchanged: exact JSON types, str keys, depth <= 100."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth >= 100:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) not in _SCALARS and not (type(item) in _CONTAINERS and _plain_json(item, depth + 1)):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            if type(item) not in _SCALARS and not (type(item) in _CONTAINERS and _plain_json(item, depth + 1)):
                return False
        return True
    return False


def _encode_json_fast(value: Any, limit: int) -> str | None:
    """The encoding of ``value`` when it is plainly valid, else None (the careful path decides).

    Exactly the text ``encode_json`` returns: NaN, ``\\u0000`` (even a false
    alarm), unpaired surrogates and oversize payloads all go the careful way.
    """
    if value is None:
        return "null"
    if not _plain_json(value):
        return None
    try:
        text = _ENCODER.encode(value)
        size = len(text.encode("utf-8"))
    except (ValueError, UnicodeEncodeError):
        return None
    if size > limit or "\\u0000" in text:
        return None
    return text


def encode_json(value: Any, field: str, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """Check that ``value`` is strict JSON and encode it compactly."""
    text = _encode_json_fast(value, limit)
    if text is not None:
        return text
    _check_json(value, field)
    text = _ENCODER.encode(value)
    size = len(text.encode("utf-8"))
    if size > limit:
        raise ValidationError(field, f"{size} bytes encoded, over the limit of {limit} bytes")
    return text


def check_int(value: Any, field: str, *, minimum: int = INT32_MIN, maximum: int = INT32_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum or value > maximum:
        raise ValidationError(field, f"{value} is outside [{minimum}, {maximum}]")
    return int(value)


def check_number(value: Any, field: str, *, minimum: float, maximum: float, strict_min: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(field, f"must be a number of seconds, got {type(value).__name__} {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValidationError(field, f"must be finite, got {value!r}")
    if strict_min and number <= minimum:
        raise ValidationError(field, f"must be > {minimum:g}, got {value!r}")
    if number < minimum:
        raise ValidationError(field, f"must be >= {minimum:g}, got {value!r}")
    if number > maximum:
        raise ValidationError(field, f"must be <= {maximum:g}, got {value!r}")
    return number


def _plain_name(value: str) -> bool:
    """The one definition of a good name; check_name says what is wrong with the others."""
    return 0 < len(value) <= MAX_NAME_LENGTH and not value.isspace() and _BAD_NAME_CHAR.search(value) is None


def check_name(value: Any, field: str) -> str:
    """Queue, pool, worker and dedupe names: non-empty printable text up to 200 characters."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__} {value!r}")
    if _plain_name(value):
        return value
    if value == "" or value.strip() == "":
        raise ValidationError(field, "must not be empty or blank")
    if len(value) > MAX_NAME_LENGTH:
        raise ValidationError(field, f"is {len(value)} characters long, over the limit of {MAX_NAME_LENGTH}")
    if _CONTROL_CHAR.search(value) is not None:
        raise ValidationError(field, "must not contain control characters")
    raise ValidationError(field, "must not contain unpaired surrogates")


def check_optional_name(value: Any, field: str) -> str | None:
    return None if value is None else check_name(value, field)


def check_available(value: Any) -> int | None:
    if value is None:
        return None
    return check_int(value, "available", minimum=0, maximum=2**62)


def check_order(value: Any) -> Order:
    if value not in ORDERS:
        raise ValidationError("order", f"must be 'min' or 'max', got {value!r}")
    return "max" if value == "max" else "min"


def check_lease(value: Any, field: str = "lease") -> float:
    return check_number(value, field, minimum=0.0, maximum=MAX_LEASE_SECONDS, strict_min=True)


def check_queues(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise ValidationError("queues", "must be a list of queue names, not a single string")
    try:
        items = list(value)
    except TypeError:
        raise ValidationError("queues", f"must be a list of queue names, got {type(value).__name__}") from None
    if not items:
        raise ValidationError("queues", "must not be empty (pass None for every queue)")
    return sorted({check_name(q, "queues") for q in items})


def check_task_id(value: Any) -> int:
    return check_int(value, "task_id", minimum=1, maximum=2**63 - 1)


def check_pool_limit(value: Any) -> int | None:
    if value is None:
        return None
    return check_int(value, "limit", minimum=0)


def check_error_text(value: Any) -> str:
    if isinstance(value, BaseException):
        text = f"{type(value).__name__}: {value}"
    elif isinstance(value, str):
        text = value
    else:
        raise ValidationError("error", f"must be a str or an exception, got {type(value).__name__}")
    text = text.replace("\x00", "\\u0000")
    # Unpaired surrogates cannot be stored as UTF-8: escape them like \u0000.
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:MAX_ERROR_LENGTH]


def build_spec(
    payload: Any,
    *,
    queue: Any = "default",
    priority: Any = 0,
    required: Any = 0,
    pool: Any = None,
    run_at: Any = None,
    delay: Any = None,
    max_attempts: Any = 3,
    dedupe_key: Any = None,
    estimate: Any = None,
) -> TaskSpec:
    """Validate the arguments of ``enqueue``; raise ``ValidationError`` naming the field."""
    payload_json = encode_json(payload, "payload")
    queue = check_name(queue, "queue")
    priority = check_int(priority, "priority")
    required = check_int(required, "required", minimum=0)
    pool = check_optional_name(pool, "pool")
    max_attempts = check_int(max_attempts, "max_attempts", minimum=1, maximum=1000)
    dedupe_key = check_optional_name(dedupe_key, "dedupe_key")
    if run_at is not None and delay is not None:
        raise ValidationError("run_at", "give run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, dt.datetime):
            raise ValidationError("run_at", f"must be a datetime, got {type(run_at).__name__}")
        if run_at.tzinfo is None or run_at.tzinfo.utcoffset(run_at) is None:
            raise ValidationError("run_at", "must be timezone-aware (naive datetimes are ambiguous)")
    if delay is not None:
        delay = check_number(delay, "delay", minimum=0.0, maximum=MAX_DELAY_SECONDS)
    if estimate is not None:
        estimate = check_number(estimate, "estimate", minimum=0.0, maximum=MAX_DELAY_SECONDS)
    return TaskSpec(payload_json, queue, priority, required, pool, run_at, delay, max_attempts, dedupe_key, estimate)


def build_spec_from_mapping(spec: Any, index: int) -> TaskSpec:
    """Validate one entry of ``enqueue_many``; errors name the entry's index."""
    if not isinstance(spec, Mapping):
        raise ValidationError(f"specs[{index}]", f"must be a mapping, got {type(spec).__name__}")
    unknown = sorted(str(k) for k in spec if k not in ENQUEUE_KEYS)
    if unknown:
        raise ValidationError(f"specs[{index}]", f"unknown key(s) {', '.join(unknown)}")
    if "payload" not in spec:
        raise ValidationError(f"specs[{index}].payload", "is missing")
    kwargs = dict(spec)
    payload = kwargs.pop("payload")
    try:
        return build_spec(payload, **kwargs)
    except ValidationError as exc:
        raise ValidationError(f"specs[{index}].{exc.field}", str(exc).split(": ", 1)[1]) from None


@dataclass(slots=True)
class TaskBatch:
    """A validated ``enqueue_many`` batch, column by column, in input order.

    Columns rather than one object per task: at 10k tasks a batch spends more
    time building objects than PostgreSQL spends storing the rows.
    """

    payloads: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    priorities: list[int] = field(default_factory=list)
    requireds: list[int] = field(default_factory=list)
    pools: list[str | None] = field(default_factory=list)
    max_attempts: list[int] = field(default_factory=list)
    run_ats: list[dt.datetime | None] = field(default_factory=list)
    delays: list[float | None] = field(default_factory=list)
    dedupe_keys: list[str | None] = field(default_factory=list)
    estimates: list[float | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.payloads)

    def append(self, spec: TaskSpec) -> None:
        self.payloads.append(spec.payload_json)
        self.queues.append(spec.queue)
        self.priorities.append(spec.priority)
        self.requireds.append(spec.required)
        self.pools.append(spec.pool)
        self.max_attempts.append(spec.max_attempts)
        self.run_ats.append(spec.run_at)
        self.delays.append(spec.delay)
        self.dedupe_keys.append(spec.dedupe_key)
        self.estimates.append(spec.estimate)

    def specs(self) -> list[TaskSpec]:
        return [
            TaskSpec(*row)
            for row in zip(
                self.payloads, self.queues, self.priorities, self.requireds, self.pools,
                self.run_ats, self.delays, self.max_attempts, self.dedupe_keys, self.estimates,
                strict=True,
            )
        ]

    @property
    def has_dedupe_keys(self) -> bool:
        return any(key is not None for key in self.dedupe_keys)

    @property
    def has_times(self) -> bool:
        """Whether any task gave run_at or delay (else every task runs from now())."""
        return any(at is not None for at in self.run_ats) or any(d is not None for d in self.delays)

    @property
    def has_estimates(self) -> bool:
        return any(e is not None for e in self.estimates)


def _name_ok(value: Any, seen: set[str]) -> bool:
    """``check_name`` as a predicate, remembering good names: a batch repeats a few names."""
    if type(value) is not str:
        return False
    if value in seen:
        return True
    if _plain_name(value):
        seen.add(value)
        return True
    return False


def build_batch(items: Sequence[Any]) -> TaskBatch:
    """Validate every entry of ``enqueue_many``; the first bad one raises, naming its index.

    Entries of exact, plain types are checked inline; anything else (and every
    entry with run_at, delay or estimate) goes through ``build_spec_from_mapping``, so
    both ways accept and reject exactly the same input.
    """
    batch = TaskBatch()
    seen: set[str] = set()
    allowed = ENQUEUE_KEYS.issuperset
    for index, spec in enumerate(items):
        if type(spec) is dict and "payload" in spec and allowed(spec):
            get = spec.get
            payload = _encode_json_fast(spec["payload"], MAX_PAYLOAD_BYTES)
            queue = get("queue", "default")
            priority = get("priority", 0)
            required = get("required", 0)
            pool = get("pool")
            max_attempts = get("max_attempts", 3)
            dedupe_key = get("dedupe_key")
            if (
                payload is not None
                and _name_ok(queue, seen)
                and type(priority) is int and INT32_MIN <= priority <= INT32_MAX
                and type(required) is int and 0 <= required <= INT32_MAX
                and (pool is None or _name_ok(pool, seen))
                and type(max_attempts) is int and 1 <= max_attempts <= 1000
                and (dedupe_key is None or _name_ok(dedupe_key, seen))
                and get("run_at") is None
                and get("delay") is None
                and get("estimate") is None
            ):
                batch.payloads.append(payload)
                batch.queues.append(queue)
                batch.priorities.append(priority)
                batch.requireds.append(required)
                batch.pools.append(pool)
                batch.max_attempts.append(max_attempts)
                batch.run_ats.append(None)
                batch.delays.append(None)
                batch.dedupe_keys.append(dedupe_key)
                batch.estimates.append(None)
                continue
        batch.append(build_spec_from_mapping(spec, index))
    return batch


def check_state(value: Any) -> TaskState | None:
    """A state filter: None (every state) or one of STATES."""
    if value is not None and value not in STATES:
        raise ValidationError("state", f"must be one of {', '.join(STATES)}, got {value!r}")
    return value  # type: ignore[no-any-return]
