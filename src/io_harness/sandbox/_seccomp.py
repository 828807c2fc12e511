"""The seccomp filter every Linux sandbox loads: no network sockets, no kernel surfaces.

Built once per process with ``pyseccomp`` (libseccomp) and kept as compiled
BPF bytes, which each command's scratch folder receives as a file that
bubblewrap (``--seccomp FD``) or the launcher loads. Denied
calls fail with ``EPERM`` (sockets: ``EACCES``) rather than killing, so a
program sees an ordinary error it can report.
"""

from __future__ import annotations

import errno
import functools
import socket
import tempfile

__all__ = ["DENIED_SYSCALLS", "seccomp_available", "seccomp_program"]

DENIED_SYSCALLS = (
    "ptrace",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "process_vm_readv",
    "process_vm_writev",
)
"""Calls a sandboxed command never needs and escapes have used."""

# clone() with any of these flags makes a namespace, which unshare() would too.
_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


def seccomp_available() -> tuple[bool, str]:
    """Whether a filter can be built here, and why not."""
    try:
        seccomp_program(deny_network=True)
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        return False, f"seccomp: {exc}"
    return True, "libseccomp found"


@functools.cache
def seccomp_program(*, deny_network: bool) -> bytes:
    """The compiled filter: a BPF program for the machine's architecture.

    With ``deny_network`` every socket family but ``AF_UNIX`` is refused.
    """
    import pyseccomp as sc  # type: ignore[import-untyped]  # libseccomp via ctypes; Linux only

    rules = sc.SyscallFilter(defaction=sc.ALLOW)
    for family in ("socket", "socketpair") if deny_network else ():
        rules.add_rule(sc.ERRNO(errno.EACCES), family, sc.Arg(0, sc.NE, socket.AF_UNIX))
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(sc.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            continue  # a call this architecture does not have
    for flag in _NAMESPACE_FLAGS:
        rules.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory a filter cannot read; libc falls back to clone.
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as handle:
        rules.export_bpf(handle)
        handle.seek(0)
        return handle.read()
