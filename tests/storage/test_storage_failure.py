"""`robotad.storage.failure`: how a failed file operation is named on the wire."""

from __future__ import annotations

import errno
from pathlib import Path

from robotad.storage.failure import StorageError, exhausted, storage_failed


def test_out_of_descriptors_anywhere_in_the_chain_is_named_relative_to_the_state_folder(
    tmp_path: Path,
) -> None:
    """EMFILE/ENFILE is the system's limit, never a bug: StorageFailed naming the file
    relative to the state folder (a file outside it by its name alone: no absolute path ever
    reaches the wire), or "a file" when the error names none or names a descriptor."""
    inner = OSError(errno.EMFILE, "Too many open files", str(tmp_path / "sessions" / "s.json"))
    try:
        try:
            raise inner
        except OSError as exc:
            raise RuntimeError("loading failed") from exc
    except RuntimeError as outer:
        caught = exhausted(outer, tmp_path, "s")
    assert caught is not None
    assert caught.data == {
        "sessionId": "s",
        "path": "sessions/s.json",
        "reason": "too many open files",
    }
    assert str(caught) == "cannot open sessions/s.json: too many open files"

    outside = exhausted(OSError(errno.ENFILE, "Too many open files in system", "/etc/x"), tmp_path)
    assert outside is not None
    assert outside.data is not None
    assert outside.data["path"] == "x"
    for unnamed in (OSError(errno.EMFILE, "Too many open files"), _with_filename(7)):
        found = exhausted(unnamed, tmp_path)
        assert found is not None
        assert str(found) == "cannot open a file: too many open files"
    assert exhausted(OSError(errno.ENOENT, "No such file"), tmp_path) is None
    assert exhausted(ExceptionGroup("one", [inner]), tmp_path) is not None


def test_a_storage_error_is_found_through_a_single_member_group() -> None:
    error = StorageError("sessions/s.json", "no space left on device", errno.ENOSPC)
    found = storage_failed(ExceptionGroup("one", [RuntimeError("x")]), "s")
    assert found is None
    try:
        raise RuntimeError("saving") from error
    except RuntimeError as outer:
        found = storage_failed(ExceptionGroup("one", [outer]), "s")
    assert found is not None
    assert found.data == {
        "sessionId": "s",
        "path": "sessions/s.json",
        "reason": "no space left on device",
    }


def _with_filename(fd: int) -> OSError:
    exc = OSError(errno.EMFILE, "Too many open files")
    exc.filename = fd  # a call on a descriptor names it so
    return exc
