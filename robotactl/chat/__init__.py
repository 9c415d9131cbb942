"""``robotactl chat``: an interactive terminal session on a robotad session.

A prompt (prompt_toolkit) scrolls like a shell above a status line; replies stream in and are
rendered as Markdown (rich) once complete; approvals are answered inline. Everything shown
comes from the documented protocol (``session/run`` with ``wait: false`` and the session's
event stream). The modules, one concept each:

- `command`: the click command (imports nothing heavy; the rest loads when it runs);
- `host`: the asyncio host running prompt_toolkit with trio as a guest for the connection;
- `state`: what the chat knows (session, turn, approvals, streamed text) — plain values;
- `follower`: the session's event stream applied to the state and the screen;
- `controller`: what the person's input does: prompts, approvals, slash commands' requests;
- `slash`: slash-command parsing and help; `actions`: carrying them out (through `ChatPort`,
  what they need of the controller);
- `approval`: the exact-call allow rule an "always" answer adds;
- `screen`: the protocol the trio side draws through;
- `prompt`: the prompt_toolkit session (keys, the live area) implementing it;
- `completion`: Tab completion of commands, modes and paths;
- `history`: the daemon's prompt history as prompt_toolkit history;
- `render`: rich rendering of Markdown, tool lines, approvals and diffs;
- `status`: the status line.

This package's ``__init__`` imports nothing, so ``robotactl --help`` stays cheap.
"""
