"""The seccomp filter every sandboxed command runs under: no Unix-domain sockets, no io_uring,
no socket of a family but IPv4, IPv6 and netlink, no kernel keyring.

bubblewrap confines the file system and the network, but a Unix socket is a door that neither
closes: ``connect()`` to a socket path is not a write, and behind those paths wait programs that
run unconfined on the user's behalf — robotad itself (a sandboxed command could ask it for an
unsandboxed session), the systemd user manager on D-Bus (``systemd-run --user``), an SSH or GPG
agent, a container engine. The filter makes ``socket(AF_UNIX, …)`` fail with ``EPERM``,
and ``socketpair(AF_UNIX, …)`` too unless the pair is a stream or a seqpacket one: those are
connected to each other for good, while a datagram socket of a pair can still ``sendto`` any
socket path (the journal, a ``NOTIFY_SOCKET``). It also refuses the
``io_uring`` calls, whose ``IORING_OP_SOCKET`` would create the same socket without passing
through the ``socket`` system call. A system call of another architecture (a 32-bit program on
a 64-bit kernel, the x32 ABI) kills the process rather than slipping past the numbers below.

`filter_program(arch)` is pure: it returns the classic-BPF program as the bytes bubblewrap reads
from its ``--seccomp FD``. `native_arch()` names the running machine's architecture, or None
where this module has no table for it (then no sandbox can be offered, see `support`).
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import Final, Literal

__all__ = ["Arch", "UnsupportedArchitecture", "filter_program", "native_arch"]

Arch = Literal["x86_64", "aarch64", "riscv64"]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
_NR: Final = 0
_ARCH: Final = 4
_ARG0_LOW: Final = 16  # the low half of args[0] on the little-endian machines below
_ARG1_LOW: Final = 24

# Classic BPF opcodes (linux/filter.h).
_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_JGE_K: Final = 0x35
_AND_K: Final = 0x54
_RET_K: Final = 0x06

_RET_ALLOW: Final = 0x7FFF0000
_RET_ERRNO: Final = 0x00050000
_RET_KILL_PROCESS: Final = 0x80000000

_AF_UNIX: Final = 1
#: The only families `socket` may make: IPv4, IPv6 (both inside the sandbox's own network
#: namespace when it has no network) and netlink (which address lookups use). Anything else —
#: AF_UNIX, and AF_VSOCK, which no network namespace confines — is refused.
_SOCKET_FAMILIES: Final = (2, 10, 16)
#: The socket types a Unix socket pair may have (``type & 0xf``; flags such as
#: ``SOCK_CLOEXEC`` sit above): ``SOCK_STREAM`` and ``SOCK_SEQPACKET``.
_SOCK_TYPE_MASK: Final = 0xF
_SOCK_STREAM: Final = 1
_SOCK_SEQPACKET: Final = 5
_IO_URING: Final = (425, 426, 427)  # io_uring_setup, _enter, _register: one number everywhere
_X32_BIT: Final = 0x40000000


class _Table:
    def __init__(
        self,
        audit_arch: int,
        socket: int,
        socketpair: int,
        keyring: tuple[int, int, int],
        *,
        x32_bit: bool = False,
    ) -> None:
        self.audit_arch = audit_arch
        self.socket = socket
        self.socketpair = socketpair
        #: add_key, request_key, keyctl: the kernel keyring the command inherits holds the
        #: user's session keys (Kerberos tickets, file-system keys).
        self.keyring = keyring
        self.x32_bit = x32_bit


_TABLES: Final[dict[Arch, _Table]] = {
    "x86_64": _Table(0xC000003E, 41, 53, (248, 249, 250), x32_bit=True),
    "aarch64": _Table(0xC00000B7, 198, 199, (217, 218, 219)),
    "riscv64": _Table(0xC00000F3, 198, 199, (217, 218, 219)),
}


class UnsupportedArchitecture(Exception):
    """No filter is known for this machine."""


def native_arch() -> Arch | None:
    """The running machine's architecture when a filter exists for it, else None."""
    machine = platform.machine().lower()
    aliases: dict[str, Arch] = {
        "x86_64": "x86_64",
        "amd64": "x86_64",
        "aarch64": "aarch64",
        "arm64": "aarch64",
        "riscv64": "riscv64",
    }
    return aliases.get(machine)


def filter_program(arch: Arch) -> bytes:
    """The filter for `arch` as ``struct sock_filter`` records in native byte order.

    Raises `UnsupportedArchitecture` for an architecture without a table."""
    table = _TABLES.get(arch)
    if table is None:
        raise UnsupportedArchitecture(f"no seccomp table for {arch}")
    # Each entry: (code, jump-if-true label, jump-if-false label, k). Labels are resolved below.
    deny = _RET_ERRNO | errno.EPERM
    program: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, _ARCH),
        (_JEQ_K, None, "kill", table.audit_arch),
        (_LD_W_ABS, None, None, _NR),
    ]
    if table.x32_bit:
        program.append((_JGE_K, "kill", None, _X32_BIT))
    program.append((_JEQ_K, "socket", None, table.socket))
    program.append((_JEQ_K, "socketpair", None, table.socketpair))
    program.extend((_JEQ_K, "deny", None, number) for number in (*_IO_URING, *table.keyring))
    labels = {"allow": len(program)}
    program.append((_RET_K, None, None, _RET_ALLOW))
    labels["socket"] = len(program)
    program.append((_LD_W_ABS, None, None, _ARG0_LOW))
    for family in _SOCKET_FAMILIES[:-1]:
        program.append((_JEQ_K, "allow socket", None, family))
    program.append((_JEQ_K, "allow socket", "deny", _SOCKET_FAMILIES[-1]))
    labels["allow socket"] = len(program)
    program.append((_RET_K, None, None, _RET_ALLOW))  # BPF jumps only forward
    labels["socketpair"] = len(program)
    program.append((_LD_W_ABS, None, None, _ARG0_LOW))
    program.append((_JEQ_K, None, "allow pair", _AF_UNIX))
    program.append((_LD_W_ABS, None, None, _ARG1_LOW))
    program.append((_AND_K, None, None, _SOCK_TYPE_MASK))
    program.append((_JEQ_K, "allow pair", None, _SOCK_STREAM))
    program.append((_JEQ_K, "allow pair", "deny", _SOCK_SEQPACKET))
    labels["allow pair"] = len(program)
    program.append((_RET_K, None, None, _RET_ALLOW))
    labels["deny"] = len(program)
    program.append((_RET_K, None, None, deny))
    labels["kill"] = len(program)
    program.append((_RET_K, None, None, _RET_KILL_PROCESS))

    def offset(at: int, label: str | None) -> int:
        return 0 if label is None else labels[label] - at - 1

    return b"".join(
        struct.pack("=HBBI", code, offset(at, jt), offset(at, jf), k)
        for at, (code, jt, jf, k) in enumerate(program)
    )
