"""The launcher's confining steps, through ctypes: no new privileges, Landlock, seccomp.

Loaded by the launcher (by path) only for the backends that confine a
command themselves, since ctypes costs a few milliseconds to import. Any
failure raises :class:`ConfineError`; the launcher reports it and exits.
"""

from __future__ import annotations

import ctypes
import os
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock filesystem rights (linux/landlock.h) that change something.
_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _WRITE_FILE | _TRUNCATE | _IOCTL_DEV
_NET_TCP = (1 << 0) | (1 << 1)  # bind and connect
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_SCOPES = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL


class ConfineError(Exception):
    """A confining step failed; the command must not run."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _fail(message: str) -> None:
    raise ConfineError(message)


def confine(writable: list[str] | None, seccomp: str | None) -> None:
    """Forbid new privileges, then allow writes only beneath ``writable`` (unless
    ``None``) and load the compiled seccomp filter at ``seccomp`` (unless ``None``)."""
    if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
    if writable is not None:
        _landlock(writable)
    if seccomp is not None:
        _seccomp(seccomp)


def _handled_fs(abi: int) -> int:
    rights = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def _landlock(writable: list[str]) -> None:
    """Allow writes beneath ``writable`` only; reads stay as they were; TCP is denied; no
    signal or abstract Unix socket reaches a process outside (the host's daemons listen
    on abstract sockets, and a command here shares the host's network namespace)."""
    libc = _libc()
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)
    if abi < 1:
        _fail(f"Landlock is not available (errno {ctypes.get_errno()})")
    handled = _handled_fs(abi)
    attr = struct.pack("QQQ", handled, _NET_TCP if abi >= 4 else 0, _SCOPES if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    buffer = ctypes.create_string_buffer(attr[:size], size)
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, buffer, ctypes.c_size_t(size), 0)
    if ruleset < 0:
        _fail(f"landlock_create_ruleset failed (errno {ctypes.get_errno()})")
    for path in writable:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a device or folder this machine lacks
        rights = handled if os.path.isdir(path) else handled & _FILE_RIGHTS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)
        added = libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, rule, 0)
        os.close(fd)
        if added != 0:
            _fail(f"landlock_add_rule {path} failed (errno {ctypes.get_errno()})")
    if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
        _fail(f"landlock_restrict_self failed (errno {ctypes.get_errno()})")
    os.close(ruleset)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _seccomp(path: str) -> None:
    with open(path, "rb") as handle:
        program = handle.read()
    fprog = _SockFprog(len(program) // 8, program)
    if _libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        _fail(f"loading the seccomp filter failed (errno {ctypes.get_errno()})")
