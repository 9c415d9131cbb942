"""Structured logging to stderr, readable in a terminal and in the journal.

Every record is one line: the message, then the record's fields as ``key=value`` pairs (pass
them as ``extra=fields(session_id=..., turn_id=...)``). Two renderings:

- under systemd (``JOURNAL_STREAM`` names our stderr): ``<6>robotad.server: message key=value``
  — the ``<N>`` prefix is the syslog priority journald files the line under, and the journal
  adds its own timestamp;
- elsewhere: ``2025-01-31T12:00:00.123Z INFO robotad.server: message key=value``.

A multi-line record (a traceback) gets the prefix on every line, so journald keeps each line at
the record's priority. Values are quoted when they hold spaces, quotes, ``=`` or control
characters, so one record never spills into what looks like another. Callers never log secrets:
this module formats what it is given and does not scrub.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = ["LEVELS", "CompactFormatter", "JournalFormatter", "configure_logging", "fields"]

#: The names ``--log-level`` accepts.
LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

_SYSLOG_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}

_FIELDS_ATTR = "robota_fields"


def fields(**values: Any) -> dict[str, Any]:
    """The ``extra=`` mapping that attaches `values` to one record as ``key=value`` pairs."""
    return {_FIELDS_ATTR: values}


def _render_value(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if text and not any(ch in text for ch in ' "=\\') and text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=False)


def _render_fields(record: logging.LogRecord) -> str:
    values: Mapping[str, Any] | None = getattr(record, _FIELDS_ATTR, None)
    if not values:
        return ""
    return "".join(f" {key}={_render_value(value)}" for key, value in values.items())


class _LineFormatter(logging.Formatter):
    def _body(self, record: logging.LogRecord) -> str:
        body = f"{record.name}: {record.getMessage()}{_render_fields(record)}"
        if record.exc_info:
            body += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            body += "\n" + self.formatStack(record.stack_info)
        return body


class CompactFormatter(_LineFormatter):
    """``<UTC time> <LEVEL> <logger>: <message> key=value…``"""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        millis = int(record.msecs)
        prefix = f"{stamp}.{millis:03d}Z {record.levelname} "
        lines = self._body(record).split("\n")
        return "\n".join([prefix + lines[0], *("    " + line for line in lines[1:])])


class JournalFormatter(_LineFormatter):
    """``<priority><logger>: <message> key=value…``, the prefix repeated on every line."""

    def format(self, record: logging.LogRecord) -> str:
        priority = _SYSLOG_PRIORITY.get(record.levelno)
        if priority is None:
            priority = next(
                (p for level, p in sorted(_SYSLOG_PRIORITY.items()) if record.levelno <= level), 2
            )
        return "\n".join(f"<{priority}>{line}" for line in self._body(record).split("\n"))


def writes_to_journal(stream: TextIO, environ: Mapping[str, str]) -> bool:
    """True when ``JOURNAL_STREAM`` (``device:inode``) names `stream`'s file."""
    value = environ.get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (info.st_dev, info.st_ino) == (int(device), int(inode))


def configure_logging(
    level: str | int = "info",
    *,
    stream: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
) -> logging.Handler:
    """Send the ``robotad`` and ``protocol`` loggers to `stream` (default stderr) at `level`.

    Replaces any handler a previous call installed, so calling it twice is harmless. Returns
    the handler. Raises `ValueError` for an unknown level name.
    """
    if isinstance(level, str):
        if level.lower() not in LEVELS:
            raise ValueError(f"unknown log level {level!r}; choose one of {', '.join(LEVELS)}")
        level = LEVELS[level.lower()]
    out = sys.stderr if stream is None else stream
    env = os.environ if environ is None else environ
    handler = logging.StreamHandler(out)
    handler.setFormatter(JournalFormatter() if writes_to_journal(out, env) else CompactFormatter())
    handler.set_name("robota")
    for name in ("robotad", "protocol"):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == "robota"]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    return handler
