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


# -- Running as an unprivileged uid when the harness is root -----------------------------------

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
_MS_RDONLY, _MS_REMOUNT = 0x1, 0x20
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442  # the same everywhere
_OPEN_TREE_CLONE, _AT_RECURSIVE, _AT_EMPTY_PATH = 1, 0x8000, 0x1000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_IDMAP = 0x00100000
_AT_FDCWD = -100


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _call(result: int, what: str) -> int:
    if result < 0:
        number = ctypes.get_errno()
        _fail(f"{what} failed: {os.strerror(number)}")
    return result


def _searchable_by_others(path: str) -> bool:
    return os.stat(path).st_mode & 0o001 != 0


def _open_to_others(path: str) -> bool:
    """Whether any user may use ``path``: read and enter a folder, read a file."""
    wanted = 0o005 if os.path.isdir(path) else 0o004
    return os.stat(path).st_mode & wanted == wanted


def lend_to(
    uid: int,
    gid: int,
    writable: list[str],
    needed: list[str],
    masked: list[str] | None = None,
    kept: list[str] | None = None,
) -> None:
    """Let ``uid``/``gid`` write ``writable`` and reach ``needed`` (Linux, as root).

    In a mount namespace of this process's own: each path of ``writable`` is
    remounted on itself idmapped, so ``uid`` sees the files of the path's owner
    (root's, or a user's) as its own and what it writes lands on disk as the
    owner's; files of other owners there keep their modes. Each folder others may
    not enter on the way to a path of either list is covered by an empty one, into
    which the next component on the way is mounted back, so the rest stays hidden;
    a path of ``needed`` others may not enter is idmapped like one to write.
    Each path of ``masked`` that is there (a host daemon's socket, the harness's
    store) is covered: a file by ``/dev/null``, so connecting to it or reading it
    fails, a folder by an empty one. Each path of ``kept`` (what runs code
    later) is bound onto itself read-only, after the lending, so it can be
    neither changed nor moved.
    The process then changes to ``uid`` itself (the launcher does that).
    """
    libc = _libc()
    _call(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _call(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    writable = [os.path.realpath(path) for path in writable]
    # A needed path is reached by its name (a virtualenv's python, a link) and then where
    # it leads: the folders on both ways must let the uid through.
    needed = sorted({way for path in needed for way in _ways(path)})
    hidden: dict[str, set[str]] = {}  # a folder others may not enter -> the components needed
    for path in (*writable, *needed):
        _note_hidden(path, writable, hidden)
    places = _places(hidden, needed, writable)
    # Every tree is cloned before any folder is covered, while each is still reachable.
    steps = _cloned(places, hidden, uid, gid)
    # Outer paths first; a folder is mounted back into its cover before it is covered.
    for place, is_folder, tree in sorted(steps, key=lambda step: (len(step[0]), step[2] < 0)):
        _mount_one(libc, place, is_folder, tree)
    _cover_and_keep(libc, masked or [], kept or [])


def _ways(path: str) -> set[str]:
    """``path`` by its own name (its folder resolved) and where it leads (resolved)."""
    named = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return {named, os.path.realpath(path)}


def _places(hidden: dict[str, set[str]], needed: list[str], writable: list[str]) -> dict[str, bool]:
    """Each path to mount back or lend, and whether it is lent to write: the components
    needed inside each hidden folder (but those covered in turn), the paths of ``needed``
    others may not enter, and every path of ``writable``."""
    places = {
        place: False
        for folder, names in hidden.items()
        for place in (os.path.join(folder, name) for name in names)
        if place not in hidden  # covered in turn, not mounted back
    }
    places.update({path: False for path in needed if not _open_to_others(path)})
    places.update(dict.fromkeys(writable, True))
    return places


def _cloned(
    places: dict[str, bool], hidden: dict[str, set[str]], uid: int, gid: int
) -> list[tuple[str, bool, int]]:
    """The mount steps: each hidden folder to cover (tree ``-1``), then each place with its
    tree cloned, idmapped to ``uid`` when it is lent, or others may not use it, and
    someone else owns it."""
    owners: dict[tuple[int, int], int] = {}  # a path's owner -> a namespace mapping it to uid
    steps: list[tuple[str, bool, int]] = [(folder, True, -1) for folder in hidden]
    for place, lent in places.items():
        status = os.stat(place)
        mapped = -1
        if (lent or not _open_to_others(place)) and status.st_uid != uid:
            owner = (status.st_uid, status.st_gid)
            if owner not in owners:
                owners[owner] = _userns(owner, (uid, gid))
            mapped = owners[owner]
        steps.append((place, os.path.isdir(place), _clone(place, mapped)))
    for namespace in owners.values():
        os.close(namespace)
    return steps


def _mount_one(libc: ctypes.CDLL, place: str, is_folder: bool, tree: int) -> None:
    """Cover ``place`` with an empty tmpfs (``tree`` is ``-1``), or move the cloned ``tree``
    onto it; either way ``place`` is made first if it is not there."""
    _mountpoint(place, is_folder)
    if tree < 0:
        flags = _MS_NOSUID | _MS_NODEV
        cover = libc.mount(b"tmpfs", place.encode(), b"tmpfs", flags, b"mode=0755")
        _call(cover, f"covering {place}")
        return
    moved = libc.syscall(
        _SYS_MOVE_MOUNT, tree, b"", _AT_FDCWD, place.encode(), _MOVE_MOUNT_F_EMPTY_PATH
    )
    _call(moved, f"mounting {place}")
    os.close(tree)


def _cover_and_keep(libc: ctypes.CDLL, masked: list[str], kept: list[str]) -> None:
    """Cover each path of ``masked`` that is there; bind each of ``kept`` read-only."""
    for path in kept:
        if os.path.lexists(path):
            _call(libc.mount(path.encode(), path.encode(), None, _MS_BIND | _MS_REC, None), path)
            flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
            _call(libc.mount(b"none", path.encode(), None, flags, None), f"keeping {path}")
    for path in masked:
        if os.path.isdir(path) and not os.path.islink(path):
            cover = libc.mount(b"tmpfs", path.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"")
            _call(cover, f"covering {path}")
        elif os.path.lexists(path):
            _call(libc.mount(b"/dev/null", path.encode(), None, _MS_BIND, None), f"masking {path}")


def _note_hidden(path: str, writable: list[str], hidden: dict[str, set[str]]) -> None:
    """Record each folder others may not enter on the way to ``path``, with the component
    below it on the way; not inside a folder to write (its idmap lets the uid in)."""
    folder = "/"
    for name in path.strip("/").split("/")[:-1]:
        below = os.path.join(folder, name)
        if below in writable:
            return
        if not _searchable_by_others(below):
            hidden.setdefault(below, set()).add(path[len(below) :].strip("/").split("/")[0])
        folder = below


def _mountpoint(place: str, folder: bool) -> None:
    """Make ``place`` exist (on a covering tmpfs it does not yet), as a folder or a file."""
    if os.path.lexists(place):
        return
    os.makedirs(os.path.dirname(place), exist_ok=True)
    if folder:
        os.mkdir(place)
    else:
        os.close(os.open(place, os.O_WRONLY | os.O_CREAT, 0o644))


def _clone(path: str, idmap: int) -> int:
    """A detached copy of the mount tree at ``path``, idmapped through ``idmap`` if given."""
    libc = _libc()
    flags = _OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC
    tree = _call(libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, path.encode(), flags), f"cloning {path}")
    if idmap >= 0:
        attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, idmap)
        _call(
            libc.syscall(
                _SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                ctypes.sizeof(attr),
            ),
            f"idmapping {path} (the kernel or its filesystem may not allow it)",
        )  # fmt: skip
    return tree


def _userns(owner: tuple[int, int], to: tuple[int, int]) -> int:
    """A user namespace that maps ``owner`` (a uid and gid on disk) to ``to``: an idmapped
    mount through it shows the owner's files as ``to``'s, and writes ``to``'s as the owner's."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        os.close(ready_r)
        os.close(done_w)
        ok = _libc().unshare(_CLONE_NEWUSER) == 0
        os.write(ready_w, b"1" if ok else b"0")
        os.read(done_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            _fail("unshare(CLONE_NEWUSER) failed")
        maps = (
            ("uid_map", f"{owner[0]} {to[0]} 1"),
            ("setgroups", "deny"),
            ("gid_map", f"{owner[1]} {to[1]} 1"),
        )
        for name, line in maps:
            with open(f"/proc/{child}/{name}", "w") as handle:
                handle.write(line)
        return os.open(f"/proc/{child}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(done_w)
        os.close(ready_r)
        os.waitpid(child, 0)
