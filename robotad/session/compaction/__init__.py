"""Compaction: the summary (one conversation rendering, the request, the compactor) and the
procedure around it (hooks, events, log, abort, the all-or-nothing apply)."""
