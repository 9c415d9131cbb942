"""The seeds' Session and its rooms.

- `session` — the `Session` façade; `composition` builds its collaborators in one place.
- `ports` — what a Session needs from outside and hands back (store, sinks, answers, snapshots).
- `runtime_settings`, `conversation`, `context_window`, `registered_tool`, `reporting`,
  `direct`, `checkpoints` — the façade's own parts: settings, history, context figures, tools as
  registered, events and log, direct tool invocation, the checkpoint tree forks read.
- `turn/` — one piece of work at a time: the claim, the turn runner, its bookkeeping, and the
  tool admission that decides each call.
- `permissions/` — the enforcer (rules, modes, consent), patterns, hazards and the auto-mode
  classifier.
- `hooks/` — hook configuration, the runner, the lifecycle of events, the shell child and trace
  context.
- `recovery/` — recoverable executions: journaled turns that park on approvals, their state and
  journal retention.
- `compaction/` — the summary (rendering, request, compactor) and the procedure around it.

Import what you use from its module; this package re-exports nothing, so importing one room
(``robotad.session.permissions.patterns``) never imports the whole stack.
"""
