"""Reading jsonb: orjson where it gives what ``json.loads`` gives, the standard library elsewhere.

psycopg decodes every jsonb value with ``json.loads`` by default; for the
payloads of a claimed batch that was about 5 µs a row, a third of the row's
decoding. orjson does it in a tenth of that, but differs on numbers: some
versions read an integer beyond 64 bits as a float, and it refuses numbers
beyond a double's range. A value with a run of 19 digits or more (an integer
that may not fit in 64 bits, or digits inside a string) therefore goes to
``json.loads``, as does anything orjson refuses, so every value comes out as
it always did.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from psycopg.abc import AdaptContext
from psycopg.types.json import set_json_loads

_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    if isinstance(data, str):
        raw = data.encode()
    elif isinstance(data, bytes):
        raw = data
    else:
        raw = bytes(data)
    if _LONG_DIGITS.search(raw) is None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def use_fast_loads(context: AdaptContext) -> None:
    """Decode json/jsonb with :func:`loads` on this connection (never process-wide: the app's own stay as they are)."""
    set_json_loads(loads, context)
