"""Recoverable execution: turns journaled so a parked approval survives any restart, the state of
one execution, and which settled executions' journals a session keeps."""
