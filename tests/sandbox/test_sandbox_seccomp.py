"""The seccomp program, run on a small classic-BPF interpreter (no kernel involved)."""

from __future__ import annotations

import errno
import struct

import pytest

from robotad.sandbox.seccomp import Arch, UnsupportedArchitecture, filter_program, native_arch

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | errno.EPERM
KILL = 0x80000000
ARCHES: dict[Arch, tuple[int, int, int]] = {  # audit arch, socket and socketpair numbers
    "x86_64": (0xC000003E, 41, 53),
    "aarch64": (0xC00000B7, 198, 199),
    "riscv64": (0xC00000F3, 198, 199),
}
SOCK_CLOEXEC, SOCK_NONBLOCK = 0x80000, 0x800
KEYRING: dict[Arch, tuple[int, int, int]] = {
    "x86_64": (248, 249, 250),
    "aarch64": (217, 218, 219),
    "riscv64": (217, 218, 219),
}


def _run(program: bytes, nr: int, arch: int, arg0: int = 0, arg1: int = 0) -> int:
    """Evaluate the filter on one system call (only the opcodes it may use)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, arg1, 0, 0, 0, 0)
    code = [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op in (0x15, 0x35):  # jeq / jge
            hit = acc == k if op == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        elif op == 0x54:  # and k
            acc &= k
            pc += 1
        elif op == 0x06:
            return int(k)
        else:
            raise AssertionError(f"unexpected opcode {op:#x}")


@pytest.mark.parametrize("arch", list(ARCHES))
def test_unix_sockets_and_io_uring_are_refused_the_rest_allowed(arch: Arch) -> None:
    program = filter_program(arch)
    audit, socket_nr, _ = ARCHES[arch]
    assert _run(program, socket_nr, audit, arg0=1) == EPERM  # AF_UNIX
    assert _run(program, socket_nr, audit, arg0=2) == ALLOW  # AF_INET
    assert _run(program, socket_nr, audit, arg0=10) == ALLOW  # AF_INET6
    assert _run(program, socket_nr, audit, arg0=16) == ALLOW  # AF_NETLINK (address lookups)
    assert _run(program, socket_nr, audit, arg0=(1 << 32) | 2) == ALLOW  # int: low half only
    for other in (40, 17, 38, 0, 3):  # AF_VSOCK, AF_PACKET, AF_ALG, AF_UNSPEC, AF_AX25
        assert _run(program, socket_nr, audit, arg0=other) == EPERM, other
    for io_uring in (425, 426, 427):
        assert _run(program, io_uring, audit) == EPERM
    for keyring in KEYRING[arch]:  # add_key, request_key, keyctl
        assert _run(program, keyring, audit) == EPERM
    assert _run(program, 0, audit) == ALLOW
    assert _run(program, 59, audit) == ALLOW


@pytest.mark.parametrize("arch", list(ARCHES))
def test_a_unix_socket_pair_may_be_a_stream_or_seqpacket_one_only(arch: Arch) -> None:
    """A datagram socket of a pair can still ``sendto`` any socket path; SOCK_RAW is a
    datagram socket for AF_UNIX. Flags above the type (``SOCK_CLOEXEC``…) change nothing."""
    program = filter_program(arch)
    audit, _, pair = ARCHES[arch]
    for kind in (1, 5, 1 | SOCK_CLOEXEC, 5 | SOCK_NONBLOCK | SOCK_CLOEXEC):
        assert _run(program, pair, audit, arg0=1, arg1=kind) == ALLOW, kind
    for kind in (2, 3, 2 | SOCK_CLOEXEC, 3 | SOCK_NONBLOCK, 0, 6, 10):
        assert _run(program, pair, audit, arg0=1, arg1=kind) == EPERM, kind
    assert _run(program, pair, audit, arg0=2, arg1=2) == ALLOW  # not AF_UNIX: the kernel's call


@pytest.mark.parametrize("arch", list(ARCHES))
def test_a_foreign_architecture_is_killed(arch: Arch) -> None:
    program = filter_program(arch)
    assert _run(program, 41, 0x40000003, arg0=1) == KILL  # i386 on a 64-bit kernel


def test_the_x32_abi_is_killed_on_x86_64() -> None:
    assert _run(filter_program("x86_64"), 0x40000000 | 41, 0xC000003E, arg0=1) == KILL


def test_an_unknown_architecture_is_refused() -> None:
    with pytest.raises(UnsupportedArchitecture):
        filter_program("mips")  # type: ignore[arg-type]


def test_this_machine_has_a_table() -> None:
    assert native_arch() in ARCHES
