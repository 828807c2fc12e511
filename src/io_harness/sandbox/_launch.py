"""The launcher: the first program of every sandboxed command on Linux.

Run as ``python -I -S -B _launch.py SPEC`` where SPEC is JSON. In order it
joins the command's cgroups, sets its rlimits, drops to another uid, applies
a Landlock ruleset and a seccomp filter, changes folder and then executes
the next program. It is a script of the standard library alone, run by path,
so it starts fast and nothing of the workspace can stand in for it.

Any failure before the exec exits with status 125 and a line on stderr that
begins with ``ioh-launch:``, so the harness can tell a sandbox that could not
be set up from a command that failed.
"""

import ctypes
import json
import os
import resource
import signal
import struct
import sys

LAUNCH_FAILED = 125
MARK = "ioh-launch:"

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
_SCOPE_SIGNAL = 1 << 1


def _fail(message: str) -> None:
    sys.stderr.write(f"{MARK} {message}\n")
    sys.stderr.flush()
    os._exit(LAUNCH_FAILED)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _join_cgroups(paths: list[str]) -> None:
    for path in paths:
        with open(os.path.join(path, "cgroup.procs"), "w") as handle:
            handle.write(str(os.getpid()))


def _set_rlimits(limits: dict[str, list[int]]) -> None:
    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _drop_uid(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


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
    """Allow writes beneath ``writable`` only; reads stay as they were; TCP is denied."""
    libc = _libc()
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)
    if abi < 1:
        _fail(f"Landlock is not available (errno {ctypes.get_errno()})")
    handled = _handled_fs(abi)
    attr = struct.pack(
        "QQQ", handled, _NET_TCP if abi >= 4 else 0, _SCOPE_SIGNAL if abi >= 6 else 0
    )
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


def _stay_as_init() -> None:
    """In a new pid namespace, run the command as a child and reap until it ends.

    The kernel drops default-action signals sent to a namespace's init, so a
    command running as pid 1 would outlive SIGXFSZ. The exit status carries a
    signal as 128 + N, as bubblewrap's does.
    """
    child = os.fork()
    if child == 0:
        return
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(LAUNCH_FAILED)
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.WEXITSTATUS(status))


def main() -> None:
    spec = json.loads(sys.argv[1])
    try:
        _join_cgroups(spec.get("cgroups", []))
        _set_rlimits(spec.get("rlimits", {}))
        if spec.get("uid") is not None:
            _drop_uid(spec["uid"], spec["gid"])
        confining = spec.get("landlock") is not None or spec.get("seccomp")
        if confining and _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            _fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
        if spec.get("landlock") is not None:
            _landlock(spec["landlock"])
        if spec.get("seccomp"):
            _seccomp(spec["seccomp"])
        if spec.get("cwd"):
            os.chdir(spec["cwd"])
    except OSError as exc:
        _fail(f"setting up the sandbox failed: {exc}")
    # Python ignores these two, and a wrapper may block signals: both survive exec.
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    if os.getpid() == 1:
        _stay_as_init()
    argv = spec["argv"]
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        _fail(f"cannot execute {argv[0]}: {exc.strerror or exc}")


if __name__ == "__main__":
    main()
