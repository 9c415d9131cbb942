"""Escape attempts from a sandboxed Bash call (PROTOCOL.md §10.4), each against real bubblewrap.

Every attempt must leave nothing changed outside the workspace and come back as a result the
model can read: failed (non-zero exit) with the command's own complaint in it. Where the sandbox
offers a private place instead (``/dev/shm``), the write stays there and the machine's own is
untouched.
"""

from __future__ import annotations

import os
import shlex
import socket
import sys
import uuid
from pathlib import Path

import pytest
import trio

from robotad.agent.tool import ToolResult
from robotad.sandbox import SandboxSupport
from robotad.tools import BashTool
from tests.sandbox.conftest import Arena, confinement
from tests.tools.tool_calls import call

#: The interpreter itself, not the venv's link to it: a checkout (and its venv) may live under
#: /tmp, which the sandbox replaces with a private one. The scripts use the standard library.
PY = shlex.quote(os.path.realpath(sys.executable))


async def run(tool: BashTool, arena: Arena, command: str) -> ToolResult:
    with trio.fail_after(30):
        return await call(tool, arena.ws, command=command)


@pytest.fixture
def bash(sandbox_support: SandboxSupport) -> BashTool:
    return BashTool(confinement(sandbox_support))


async def test_the_workspace_is_writable_and_the_result_says_so(
    bash: BashTool, arena: Arena
) -> None:
    result = await run(bash, arena, "echo made > made.txt && mkdir -p sub/deeper && pwd")
    assert result.ok, result.content
    assert (arena.ws / "made.txt").read_text() == "made\n"
    assert result.content.splitlines()[0] == str(arena.ws)
    assert arena.untouched()


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("echo pwned > {target}", id="absolute-path"),
        pytest.param("echo pwned > ~/planted", id="home"),
        pytest.param("echo pwned > ../outside/target.txt", id="dot-dot"),
        pytest.param("echo pwned > /proc/self/root{target}", id="proc-self-root"),
        pytest.param("ln -s {outside} link && echo pwned > link/target.txt", id="new-symlink"),
        pytest.param("ln {target} hard && echo pwned >> hard", id="hard-link"),
        pytest.param("echo pwned > {outside}/new.txt", id="new-file-outside"),
        pytest.param("rm -f {target}", id="remove-outside"),
        pytest.param("mv {target} .", id="move-outside-in"),
        pytest.param("echo '#!/bin/sh' > .git/hooks/pre-commit", id="git-hooks"),
        pytest.param("echo 'ref: refs/heads/evil' > .git/HEAD", id="git-head"),
        pytest.param("rm -rf .git", id="git-remove"),
        pytest.param("mv .git moved-git", id="git-move"),
        pytest.param("mount -o remount,rw / && echo pwned > {target}", id="remount"),
        pytest.param("unshare -Ur sh -c 'echo pwned > {target}'", id="nested-userns"),
    ],
)
async def test_writes_outside_the_workspace_fail(
    bash: BashTool, arena: Arena, command: str
) -> None:
    text = command.format(target=shlex.quote(str(arena.target)), outside=arena.outside)
    result = await run(bash, arena, text)
    assert not result.ok, result.content
    assert "exit status" in result.content
    assert arena.untouched()


async def test_a_symlink_already_in_the_workspace_leads_nowhere_writable(
    bash: BashTool, arena: Arena
) -> None:
    (arena.ws / "link").symlink_to(arena.outside)
    result = await run(bash, arena, "echo pwned > link/target.txt")
    assert not result.ok
    assert "Read-only file system" in result.content
    assert arena.untouched()


async def test_a_command_outlives_the_thread_that_started_it(
    bash: BashTool, arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap's --die-with-parent follows the thread that forked it, and trio forks in a worker
    thread that ends when idle (after 10 s; 0.2 s here): a sandboxed command was killed by
    SIGKILL that long after it started."""
    from trio._core import _thread_cache

    monkeypatch.setattr(_thread_cache, "IDLE_TIMEOUT", 0.2)
    result = await run(bash, arena, "sleep 1.5; echo survived")
    assert result.ok, result.content
    assert result.content.splitlines()[0] == "survived"


async def test_dev_shm_is_private_to_the_call(bash: BashTool, arena: Arena) -> None:
    name = f"robota-escape-{uuid.uuid4().hex}"
    result = await run(bash, arena, f"echo pwned > /dev/shm/{name} && cat /dev/shm/{name}")
    assert not os.path.exists(f"/dev/shm/{name}")
    assert "pwned" in result.content
    again = await run(bash, arena, f"cat /dev/shm/{name}")
    assert not again.ok  # gone with the call that wrote it
    assert arena.untouched()


async def test_tmp_is_private_to_the_call(bash: BashTool, arena: Arena, tmp_path: Path) -> None:
    result = await run(bash, arena, f"echo pwned > {tmp_path}/planted; ls /tmp")
    assert not (tmp_path / "planted").exists()
    assert result.ok  # the private /tmp is writable, and empty but for the write
    assert arena.untouched()


def _listener() -> socket.socket:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    return server


def _connected(server: socket.socket) -> bool:
    try:
        peer, _ = server.accept()
    except BlockingIOError:
        return False
    peer.close()
    return True


CONNECT = (
    PY + ' -c \'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])),'
    ' timeout=5); print("connected")\' {port}'
)


async def test_a_tcp_connect_to_the_machines_loopback_fails(bash: BashTool, arena: Arena) -> None:
    with _listener() as server:
        port = server.getsockname()[1]
        result = await run(bash, arena, CONNECT.format(port=port))
        assert not result.ok
        assert "connected" not in result.content.splitlines()
        assert "Connection refused" in result.content  # the sandbox's own, empty loopback
        assert not _connected(server)


async def test_with_network_the_same_connect_succeeds(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    """The control of the test above: the listener does see a connection it is allowed."""
    bash = BashTool(confinement(sandbox_support, network=True))
    with _listener() as server:
        result = await run(bash, arena, CONNECT.format(port=server.getsockname()[1]))
        assert result.ok, result.content
        assert _connected(server)


DNS_QUERY = (
    PY + " -c 'import socket,sys\n"
    'query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")\n'
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)\n"
    's.sendto(query, ("127.0.0.1", int(sys.argv[1])))\n'
    "print(s.recvfrom(512))' {port}"
)


async def test_a_dns_lookup_through_a_resolver_never_reaches_it(
    bash: BashTool, arena: Arena
) -> None:
    """The resolver is the test's own loopback listener: the query must not arrive."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as resolver:
        resolver.bind(("127.0.0.1", 0))
        resolver.setblocking(False)
        result = await run(bash, arena, DNS_QUERY.format(port=resolver.getsockname()[1]))
        assert not result.ok
        with pytest.raises(BlockingIOError):
            resolver.recvfrom(512)


async def test_with_network_the_same_query_arrives(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    """The control of the test above: the loopback resolver does see a query it may get."""
    bash = BashTool(confinement(sandbox_support, network=True))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as resolver:
        resolver.bind(("127.0.0.1", 0))
        command = DNS_QUERY.format(port=resolver.getsockname()[1]).replace(
            "settimeout(3)", "settimeout(0.2)"
        )
        await run(bash, arena, command)
        resolver.settimeout(5)
        query, _ = resolver.recvfrom(512)
    assert b"example" in query


async def test_a_unix_socket_to_an_unconfined_program_is_refused(
    bash: BashTool, arena: Arena
) -> None:
    """Behind a socket path waits a program that runs unconfined (robotad itself, a user
    bus); the seccomp layer refuses the socket before any connect."""
    path = arena.outside / "daemon.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        server.setblocking(False)
        script = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"
        result = await run(bash, arena, f"{PY} -c {shlex.quote(script)}")
        assert not result.ok
        assert "Operation not permitted" in result.content
        with pytest.raises(BlockingIOError):
            server.accept()
    path.unlink()
    assert arena.untouched()


async def test_tiocsti_cannot_type_into_a_terminal(bash: BashTool, arena: Arena) -> None:
    master, slave = os.openpty()
    try:
        tty = os.ttyname(slave)
        script = (
            "import fcntl, os, sys, termios\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            "fcntl.ioctl(fd, termios.TIOCSTI, b'X')\n"
            "print('typed')"
        )
        result = await run(bash, arena, f"{PY} -c {shlex.quote(script)} {tty}")
        assert not result.ok
        assert "typed" not in result.content.splitlines()
        os.set_blocking(master, False)
        with pytest.raises(BlockingIOError):
            os.read(master, 16)
    finally:
        os.close(master)
        os.close(slave)


def _processes_naming(token: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(name))
    return found


async def test_a_detached_background_child_does_not_outlive_the_call(
    bash: BashTool, arena: Arena
) -> None:
    """``setsid`` and a double fork escape an unconfined call's process-tree cleanup; in the
    sandbox the child dies with the call's PID namespace."""
    token = f"robota-escape-{uuid.uuid4().hex}"
    command = (
        f"( setsid sh -c 'sleep 1000; echo {token} > {arena.target}' </dev/null >/dev/null 2>&1 & )"
        "; echo started"
    )
    result = await run(bash, arena, command)
    assert result.ok, result.content
    assert _processes_naming(token) == []
    assert arena.untouched()


async def test_read_only_mode_cannot_write_the_workspace(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    bash = BashTool(confinement(sandbox_support, "read-only"))
    result = await run(bash, arena, "echo made > made.txt")
    assert not result.ok
    assert "Read-only file system" in result.content
    assert not (arena.ws / "made.txt").exists()
    listed = await run(bash, arena, "ls -a && echo scratch > /tmp/x && cat /tmp/x")
    assert listed.ok, listed.content  # reading, and the private /tmp, still work
    assert arena.untouched()


async def test_a_writable_root_is_writable_and_its_git_is_not(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    extra = arena.base / "extra"
    (extra / "repo" / ".git").mkdir(parents=True)
    bash = BashTool(confinement(sandbox_support, roots=(str(extra),)))
    result = await run(bash, arena, f"echo ok > {extra}/file && echo x > {extra}/repo/.git/config")
    assert (extra / "file").read_text() == "ok\n"
    assert not result.ok
    assert not (extra / "repo" / ".git" / "config").exists()


async def test_robotas_own_folder_in_the_workspace_stays_read_only(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    config = arena.ws / ".config" / "robota"
    config.mkdir(parents=True)
    bash = BashTool(confinement(sandbox_support, protected=(str(config),)))
    result = await run(bash, arena, "echo 'default_provider = \"x\"' > .config/robota/config.toml")
    assert not result.ok
    assert not (config / "config.toml").exists()


async def test_secrets_stay_out_of_the_sandboxed_environment(
    bash: BashTool, arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-the-model")
    result = await run(bash, arena, "env")
    assert result.ok
    assert "sk-not-for-the-model" not in result.content


async def test_well_known_secrets_are_hidden(bash: BashTool, arena: Arena) -> None:
    """A sandboxed call runs without asking, so it must not print a key for the model."""
    (arena.home / ".ssh").mkdir()
    (arena.home / ".ssh" / "id_ed25519").write_text("SECRET-KEY\n")
    (arena.home / ".netrc").write_text("machine x password SECRET-NETRC\n")
    (arena.home / ".git-credentials").write_text("https://me:SECRET-GIT@github.com\n")
    (arena.home / ".config" / "gh").mkdir(parents=True)
    (arena.home / ".config" / "gh" / "hosts.yml").write_text("oauth_token: SECRET-GH\n")
    (arena.home / ".azure").mkdir()
    (arena.home / ".azure" / "msal_token_cache.json").write_text("SECRET-AZ\n")
    command = (
        "cat ~/.ssh/id_ed25519 ~/.netrc ~/.git-credentials ~/.config/gh/hosts.yml "
        "~/.azure/msal_token_cache.json"
    )
    result = await run(bash, arena, command)
    assert not result.ok
    assert "SECRET" not in result.content
    listing = await run(bash, arena, "ls -A ~/.ssh")
    assert listing.content == "exit status 0"  # an empty folder
    assert (arena.home / ".ssh" / "id_ed25519").read_text() == "SECRET-KEY\n"


async def test_a_datagram_socket_pair_cannot_reach_a_socket_outside(
    bash: BashTool, arena: Arena
) -> None:
    """A datagram socket of a pair could ``sendto`` any socket path (the journal, a
    ``NOTIFY_SOCKET``): such a pair is refused; a stream pair, which programs use for their
    own plumbing, still works."""
    path = arena.outside / "dgram.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(str(path))
        server.setblocking(False)
        script = (
            "import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); "
            f"a.sendto(b'escaped', {str(path)!r})"
        )
        result = await run(bash, arena, f"{PY} -c {shlex.quote(script)}")
        assert not result.ok
        assert "Operation not permitted" in result.content
        with pytest.raises(BlockingIOError):
            server.recv(64)
    path.unlink()
    stream = "import socket; a, b = socket.socketpair(); a.send(b'ok'); print(b.recv(2).decode())"
    paired = await run(bash, arena, f"{PY} -c {shlex.quote(stream)}")
    assert paired.ok, paired.content
    assert "ok" in paired.content
    assert arena.untouched()


async def test_a_repository_cannot_be_moved_aside_and_replaced_by_a_copy(
    bash: BashTool, arena: Arena
) -> None:
    """Renaming the folder above a ``.git`` would leave its path free for a copy with a planted
    hook: every folder between the workspace and a ``.git`` is a mount point, so the rename
    fails and the repository stays where it is, untouched."""
    repo = arena.ws / "proj" / "sub"
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for folder in ("proj", "proj/sub"):
        # rename(2) fails (EBUSY); mv then tries copying and removing, which the read-only
        # .git stops; either way the folder is still there, so nothing takes its place.
        result = await run(bash, arena, f"mv {folder} moved; rm -rf {folder} && mkdir -p {folder}")
        assert not result.ok, result.content
    planted = await run(
        bash,
        arena,
        "mkdir -p elsewhere && cp -a proj/sub/.git elsewhere/ && "
        "echo 'touch pwned' > elsewhere/.git/hooks/pre-commit && ls proj/sub/.git",
    )
    assert planted.ok, planted.content  # the rest of the workspace stays writable
    assert sorted(os.listdir(repo / ".git")) == ["HEAD", "hooks"]
    assert os.listdir(repo / ".git" / "hooks") == []
    assert (repo / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert arena.untouched()


async def test_robotas_folder_cannot_be_swapped_by_renaming_its_parent(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    config = arena.ws / ".config" / "robota"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("# mine\n")
    bash = BashTool(confinement(sandbox_support, protected=(str(config),)))
    command = (
        "mv .config .config.orig && mkdir -p .config/robota && "
        "echo '[[hooks.PreToolUse]]' > .config/robota/config.toml"
    )
    result = await run(bash, arena, command)
    assert not result.ok
    assert (config / "config.toml").read_text() == "# mine\n"
    assert not (arena.ws / ".config.orig").exists()


async def test_a_writable_root_made_a_link_by_an_earlier_command_is_not_writable(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    """A configured root that does not exist yet: one command makes it a link to a folder
    outside, the next would have that folder bound writable. A folder reached through a link
    inside a writable one is not writable."""
    cache = arena.ws / ".cache"
    bash = BashTool(confinement(sandbox_support, roots=(str(cache),)))
    made = await run(bash, arena, f"ln -s {arena.outside} .cache")
    assert made.ok, made.content
    result = await run(bash, arena, f"echo pwned > {arena.outside}/target.txt")
    assert not result.ok
    written = await run(bash, arena, "echo pwned > .cache/target.txt")
    assert not written.ok
    cache.unlink()
    assert arena.untouched()


async def test_a_vsock_socket_is_refused_even_with_the_network(
    sandbox_support: SandboxSupport, arena: Arena
) -> None:
    """AF_VSOCK reaches a virtual machine's host, and no network namespace confines it: the
    filter lets only IPv4, IPv6 and netlink sockets be made."""
    bash = BashTool(confinement(sandbox_support, network=True))
    script = "import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)"
    result = await run(bash, arena, f"{PY} -c {shlex.quote(script)}")
    assert not result.ok
    assert "Operation not permitted" in result.content
    inet = "import socket; socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); print('made')"
    made = await run(bash, arena, f"{PY} -c {shlex.quote(inet)}")
    assert made.ok, made.content


async def test_the_kernel_keyring_is_out_of_reach(bash: BashTool, arena: Arena) -> None:
    """The session keyring a command inherits holds the user's keys; keyctl is refused."""
    script = (
        "import ctypes, os, platform; "
        "nr = 250 if platform.machine() == 'x86_64' else 219; "
        "libc = ctypes.CDLL(None, use_errno=True); "
        "print('keyctl', libc.syscall(nr, 0, -3), os.strerror(ctypes.get_errno()))"
    )  # KEYCTL_GET_KEYRING_ID of the session keyring
    result = await run(bash, arena, f"{PY} -c {shlex.quote(script)}")
    assert result.ok, result.content
    assert "keyctl -1 Operation not permitted" in result.content


async def test_a_repository_a_command_makes_is_reported_in_its_result(
    bash: BashTool, arena: Arena
) -> None:
    """Nothing protects a repository while the command that makes it runs, and git runs its
    hooks later for whoever uses it: the result says so, naming it; one that was there is not
    reported again."""
    made = await run(bash, arena, "mkdir -p src/.git/hooks && echo ok")
    assert made.ok, made.content
    entry = os.path.realpath(arena.ws / "src" / ".git")
    assert made.metadata["repositories_made"] == [entry]
    assert f"note: this command made the git repository {entry}" in made.content
    again = await run(bash, arena, "echo again")
    assert "repositories_made" not in again.metadata
    assert "note:" not in again.content
