"""Log lines that cannot be forged: every logged field is escaped, one record is one line.

A client controls parts of what a server logs (the path it asks for, the text of a malformed request).
Written raw, a ``%0A`` decoded into a newline starts a fake log line, ``ESC[2J`` clears an operator's
terminal and NUL bytes confuse log shippers. :func:`escape` renders every control character (C0, DEL, C1),
every Unicode line or paragraph separator and every bidirectional override as a visible ``\\xNN`` /
``\\uNNNN`` escape, and a backslash as ``\\\\``, so that the escaped text is unambiguous. The
:class:`EscapingFormatter` applies it to the whole message of each record, and to each line of a
traceback, which it indents with ``| `` so that no traceback line can pass for a record of its own.

What is logged at all is chosen elsewhere: the access log holds method, the raw (still percent-encoded)
path without its query string, status, size and time (:mod:`deniable.aggregator.front`); no client
address, header, token, query string or body is ever logged.
"""

from __future__ import annotations

import logging
import re

__all__ = ["EscapingFormatter", "escape"]

# C0 controls, DEL, C1 controls, line/paragraph separators, bidi embeddings/overrides/isolates, BOM, and the
# backslash (escaped so that an escape in the output always comes from us).
_UNSAFE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\ufeff]")


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\\":
        return "\\\\"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control or invisible-format character as a visible escape (one printable line)."""
    return _UNSAFE.sub(_escape_one, text)


class EscapingFormatter(logging.Formatter):
    """A ``logging.Formatter`` whose records are single escaped lines (tracebacks: escaped, indented lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: object) -> str:
        text = super().formatException(ei)  # type: ignore[arg-type]
        return "\n".join("| " + escape(line) for line in text.splitlines())

    def formatStack(self, stack_info: str) -> str:
        return "\n".join("| " + escape(line) for line in stack_info.splitlines())
