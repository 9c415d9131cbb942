"""The bubblewrap argv, built without running anything."""

from __future__ import annotations

import pytest

from robotad.sandbox import MountPlan, bwrap_argv

COMMAND = ["/bin/bash", "-c", "echo hi"]
CONFINING = [
    "--unshare-user",
    "--disable-userns",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--new-session",
    "--die-with-parent",
]


def _pairs(argv: list[str], flag: str) -> list[str]:
    """The first operand of every occurrence of `flag`."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def test_every_confining_flag_is_there_and_the_command_comes_last() -> None:
    argv = bwrap_argv("/usr/bin/bwrap", MountPlan(cwd="/w"), COMMAND, seccomp_fd=7)
    assert argv[0] == "/usr/bin/bwrap"
    for flag in CONFINING:
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[argv.index("--seccomp") + 1] == "7"
    assert argv[argv.index("--chdir") + 1] == "/w"
    assert argv[-4:] == ["--", *COMMAND]
    assert argv[argv.index("--ro-bind") : argv.index("--ro-bind") + 3] == ["--ro-bind", "/", "/"]
    assert _pairs(argv, "--dev") == ["/dev"]
    assert _pairs(argv, "--proc") == ["/proc"]
    assert _pairs(argv, "--tmpfs") == ["/tmp"]


@pytest.mark.parametrize(("network", "unshared"), [(False, True), (True, False)])
def test_the_network_is_unshared_unless_allowed(network: bool, unshared: bool) -> None:
    argv = bwrap_argv("bwrap", MountPlan(cwd="/w", network=network), COMMAND, seccomp_fd=3)
    assert ("--unshare-net" in argv) is unshared


def test_read_only_mode_binds_nothing_writable() -> None:
    argv = bwrap_argv("bwrap", MountPlan(cwd="/w"), COMMAND, seccomp_fd=3)
    assert "--bind" not in argv


def test_writable_folders_parents_first_then_read_only_rebinds_inside_them() -> None:
    plan = MountPlan(
        cwd="/w/sub",
        writable=("/w/sub/deep", "/w", "/cache"),
        read_only=("/w/.git", "/w/sub/deep/.git", "/w/.git"),
    )
    argv = bwrap_argv("bwrap", plan, COMMAND, seccomp_fd=3)
    assert _pairs(argv, "--bind") == ["/cache", "/w", "/w/sub/deep"]
    read_only = _pairs(argv, "--ro-bind")
    assert read_only == ["/", "/w/.git", "/w/sub/deep/.git"]
    last_writable = max(i for i, arg in enumerate(argv) if arg == "--bind")
    first_rebind = [i for i, arg in enumerate(argv) if arg == "--ro-bind"][1]
    assert last_writable < first_rebind
    assert argv[argv.index("--bind") + 2] == "/cache"  # bound at its own path


def test_pinned_folders_are_bound_after_their_parents_and_before_the_rebinds() -> None:
    plan = MountPlan(
        cwd="/w",
        writable=("/w",),
        pinned=("/w/a/b", "/w/a"),
        read_only=("/w/a/b/.git",),
    )
    argv = bwrap_argv("bwrap", plan, COMMAND, seccomp_fd=3)
    assert _pairs(argv, "--bind") == ["/w", "/w/a", "/w/a/b"]
    last_bind = max(i for i, arg in enumerate(argv) if arg == "--bind")
    assert last_bind < argv.index("/w/a/b/.git")


def test_odd_paths_stay_single_arguments() -> None:
    plan = MountPlan(cwd="/w space/x", writable=("/w space/x",))
    argv = bwrap_argv("bwrap", plan, ["/bin/sh", "-c", "rm -rf --no-preserve-root /"], seccomp_fd=3)
    assert _pairs(argv, "--bind") == ["/w space/x"]
    assert argv[-1] == "rm -rf --no-preserve-root /"


def test_without_a_filter_no_seccomp_flag() -> None:
    argv = bwrap_argv("bwrap", MountPlan(cwd="/"), COMMAND, seccomp_fd=None)
    assert "--seccomp" not in argv


def test_secrets_are_hidden_after_every_bind() -> None:
    plan = MountPlan(
        cwd="/home/u",
        writable=("/home/u",),
        hidden_dirs=("/home/u/.ssh",),
        hidden_files=("/home/u/.netrc",),
    )
    argv = bwrap_argv("bwrap", plan, COMMAND, seccomp_fd=3)
    assert _pairs(argv, "--tmpfs") == ["/tmp", "/home/u/.ssh"]
    at = argv.index("/home/u/.netrc")
    assert argv[at - 2 : at + 1] == ["--ro-bind", "/dev/null", "/home/u/.netrc"]
    assert argv.index("--bind") < argv.index("/home/u/.ssh") < at
