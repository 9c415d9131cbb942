"""robotactl's commands, one module per group; `robotactl.cli.COMMANDS` names each command.

A command module imports only click, the standard library and `robotactl` at import time;
trio, msgspec and `protocol`'s peer load inside `run_with_daemon` when the command runs.
"""
