"""A handler's exception as the text stored with its task: the summary line, then the traceback.

The ``error`` column keeps at most ``MAX_ERROR_LENGTH`` (10,000) characters.
The first line is always ``Type: message`` (what ``tasks`` shows); when the
traceback does not fit, its middle is cut, because the outermost frames say
which handler ran and the innermost ones say what failed.
"""

from __future__ import annotations

import traceback

from ..spec import MAX_ERROR_LENGTH

CUT_MARK = "\n  ... {} characters of the traceback cut ...\n"


def summary(exc: BaseException) -> str:
    """``Type: message`` on one line (the message's first line)."""
    message = str(exc).strip().split("\n", 1)[0]
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def error_text(exc: BaseException, limit: int = MAX_ERROR_LENGTH) -> str:
    """The summary, a blank line and the traceback, at most ``limit`` characters."""
    head = summary(exc)[: limit // 4]
    trace = "".join(traceback.format_exception(exc)).rstrip("\n")
    text = f"{head}\n\n{trace}"
    if len(text) <= limit:
        return text
    room = limit - len(head) - 2 - len(CUT_MARK.format(len(trace)))
    keep_start = room // 3
    keep_end = room - keep_start
    cut = len(trace) - keep_start - keep_end
    return f"{head}\n\n{trace[:keep_start]}{CUT_MARK.format(cut)}{trace[-keep_end:]}"
