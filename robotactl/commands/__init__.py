"""robotactl's commands, one module per group; `robotactl.cli.COMMANDS` names each command.

A command module imports only click, the standard library and `robotactl` at import time;
msgspec and `protocol` load when the command runs. A command answered request by request
talks through `robotactl.cli.call_daemon` (a blocking client, no trio); only the commands that
stream a turn (``run``, ``approve``, ``deny``) load trio and `protocol`'s peer, inside
`robotactl.cli.run_with_daemon`.
"""
