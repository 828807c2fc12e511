"""A pytest plugin that records what each test did, signed, for the harness to judge.

Every line of the record is ``MAC BODY``: ``BODY`` is a JSON object holding the
line's sequence number, the writing process's id and the event; ``MAC`` is
HMAC-SHA256 of ``BODY`` under a key the harness made for this run alone and
gave the process on its standard input. The harness rejects the whole record
when a line's MAC is wrong, the sequence has a gap or a repeat, a line comes
from another process than the first line's, or the session's last lines are
missing — so a file written by anything that does not hold the key, a child
process, or a process that ended early, is not a result.

Two ways in:

- the ``PytestPasses`` runner (``ioh_runner.py``) imports this module, builds a
  :class:`Record` and a guard (``ioh_guard.Guard``) before any subject code
  runs, and registers a :class:`Recorder`;
- a ``Command`` that runs pytest loads it with ``-p`` under a per-run name;
  with ``IOH_PYTEST_RECORD`` naming the record file, it reads the key from its
  standard input at import, before any ``conftest.py`` is imported.

It depends on the standard library and pytest only, and is imported by name
from its own folder, never as part of io_harness.
"""

import builtins as _builtins_module

# The functions below resolve builtins through this copy, taken before any subject
# code runs, so a subject that rebinds ``builtins.str`` does not reach them.
globals()["__builtins__"] = dict(vars(_builtins_module))

import hmac  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Generator  # noqa: E402
from json.encoder import encode_basestring_ascii as _quote  # noqa: E402
from typing import Any, Protocol  # noqa: E402

import pytest  # noqa: E402

_hmac_new: Callable[..., Any]
try:  # the OpenSSL HMAC object: its methods cannot be rebound from Python
    from _hashlib import hmac_new as _hmac_new
except ImportError:  # pragma: no cover - CPython without OpenSSL
    _hmac_new = hmac.new


_os_write = os.write
_os_read = os.read
_getpid = os.getpid

NO_BYTECODE = "no-bytecode"
"""Beside the criterion's test file, in the harness's folder: where bytecode is read
from once the subject can run. Nothing makes it, so every module imported from then
on is compiled from its source."""

KEY_BYTES = 32
"""The length of a run's key; it travels as hex on the first line of stdin."""


class Watcher(Protocol):
    """What the recorder asks of a guard (``ioh_guard.Guard``)."""

    def watch_session(self, session: Any, test_file: str) -> None:
        """Look, as the session starts; no subject code has run yet."""
        ...

    def changes(self, item: Any = None) -> list[str]:
        """What changed since the look, one sentence each."""
        ...


def _dump(value: object) -> str:
    """``value`` as compact JSON with sorted keys, by this module alone."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, str):
        return str(_quote(value))
    if isinstance(value, list | tuple):
        return "[" + ",".join([_dump(item) for item in value]) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join([_quote(str(k)) + ":" + _dump(v) for k, v in items]) + "}"
    raise TypeError(f"not recordable: {type(value).__name__}")


def read_key(fd: int = 0) -> bytes:
    """The run's key: the first line of ``fd`` (the harness's stdin), as hex."""
    data = b""
    while not data.endswith(b"\n") and len(data) <= 2 * KEY_BYTES:
        chunk = _os_read(fd, 2 * KEY_BYTES + 1 - len(data))
        if not chunk:
            break
        data += chunk
    key = bytes.fromhex(data.decode("ascii").strip())
    if len(key) != KEY_BYTES:
        raise ValueError("the harness's key did not arrive on standard input")
    return key


class Record:
    """The signed, numbered, append-only record of one session."""

    def __init__(self, path: str, key: bytes) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        self._fd = os.open(path, flags, 0o600)
        self._mac = _hmac_new(key, b"", digestmod="sha256")
        self._seq = 0

    def write(self, event: str, **fields: object) -> None:
        """Append one signed line: ``event`` with ``fields``."""
        body = _dump({**fields, "seq": self._seq, "pid": _getpid(), "event": event})
        mac = self._mac.copy()
        mac.update(body.encode("ascii"))
        self._seq += 1
        _os_write(self._fd, (mac.hexdigest() + " " + body + "\n").encode("ascii"))


class Recorder:
    """The plugin object: writes the record, and with a guard, what it saw changed.

    Its hook methods and the record's ``write`` are bound when it is built,
    before subject code runs, so rebinding them on the class later changes
    nothing here (and the guard notices it).
    """

    def __init__(
        self,
        record: Record,
        guard: Watcher | None = None,
        *,
        subject_dir: str | None = None,
        test_file: str | None = None,
    ) -> None:
        self._write: Callable[..., None] = record.write
        self._guard = guard
        self._changes = guard.changes if guard is not None else None
        self._subject_dir = subject_dir
        self._test_file = test_file
        self._reported: set[str] = set()
        self._item: Any = None

    def _check(self) -> None:
        if self._changes is None:
            return
        try:
            changes = self._changes(self._item)
        except Exception as exc:  # a guard that cannot look has seen something change
            changes = [f"the guard could not compare ({type(exc).__name__}: {exc})"]
        for change in changes:
            if change not in self._reported:
                self._reported.add(change)
                self._write("tamper", what=change)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: Any) -> None:
        if self._guard is not None and self._test_file is not None:
            self._guard.watch_session(session, self._test_file)
        if self._subject_dir is not None and self._test_file is not None:
            # Bytecode is read only from a folder of the harness's that does not exist,
            # so each subject module is compiled from its source: a ``__pycache__`` file
            # the subject left (stamped with its source's time and size, or never
            # checked against it) is not the code on disk. Set only now, so pytest's own
            # imports used their bytecode.
            sys.pycache_prefix = os.path.join(os.path.dirname(self._test_file), NO_BYTECODE)
        if self._subject_dir is not None:
            # Only now, with pytest and its plugins imported and the guard's look
            # taken, can a subject module be imported.
            sys.path.insert(0, self._subject_dir)

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._write("collect_error", nodeid=str(report.nodeid))
        elif report.skipped:
            self._write("collect_skipped", nodeid=str(report.nodeid))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: Any) -> None:
        self._write("collected", nodeids=[str(item.nodeid) for item in session.items])
        self._check()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Generator[None, object, object]:
        self._item = item
        try:
            return (yield)
        finally:
            self._item = None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        self._check()
        self._write(
            "report",
            nodeid=str(report.nodeid),
            when=str(report.when),
            outcome=str(report.outcome),
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        self._check()
        self._write("finished", exitstatus=int(exitstatus))


def _from_environment() -> Recorder | None:
    """The recorder of a ``Command`` pytest run (``-p``), or ``None`` outside one."""
    path = os.environ.get("IOH_PYTEST_RECORD", "")
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    record = Record(path, read_key())
    record.write("start")
    return Recorder(record)


_RECORDER = _from_environment()


def pytest_configure(config: Any) -> None:
    """Register this run's recorder (``Command`` runs, loaded with ``-p``)."""
    if _RECORDER is not None and not config.pluginmanager.is_registered(_RECORDER):
        config.pluginmanager.register(_RECORDER, "ioh-recorder")
