"""macOS: each command runs under ``sandbox-exec`` with a profile written for it.

The profile (SBPL, Apple's sandbox profile language) denies everything, then
allows what a build or a test suite needs: running programs, reading files,
and writing only under the scratch folder, the workdir (``workspace_write``)
and the extra writable folders. The network stays closed, or open only to the
harness's proxy socket (``allow_list``), or open (``open``). Children inherit
the profile and cannot leave it.

The shared runner (:mod:`._spawn`) starts the wrapped command, so the caps,
the proxy and the teardown are those of every POSIX backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from io_harness.errors import SandboxError
from io_harness.sandbox._command import Command, Wrapping
from io_harness.sandbox._spawn import ContainedSandbox
from io_harness.sandbox._types import Network, SandboxConfig, SandboxMode

__all__ = [
    "SANDBOX_EXEC",
    "SEATBELT",
    "SeatbeltSandbox",
    "sbpl_string",
    "seatbelt_argv",
    "seatbelt_profile",
]

SEATBELT = "seatbelt"
"""The backend's name in the trace."""

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
"""The only ``sandbox-exec`` trusted: a fixed path, never one found on ``PATH``."""

# Devices any command may write to: opening them changes no file.
_DEVICES = ("/dev/null", "/dev/zero")

# Services a command reaches with the network open: DNS configuration and TLS trust.
_NETWORK_SERVICES = (
    "com.apple.SystemConfiguration.DNSConfiguration",
    "com.apple.SystemConfiguration.configd",
    "com.apple.trustd.agent",
    "com.apple.networkd",
)


def sbpl_string(path: Path | str) -> str:
    """``path`` as an SBPL string literal: quoted, with backslash and double quote escaped.

    A control character has no escape every macOS release reads the same way,
    so a path with one is refused with :class:`SandboxError`.
    """
    text = str(path)
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in text):
        raise SandboxError(f"sandbox-exec cannot name a path with a control character: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _real(path: Path) -> str:
    # The kernel checks resolved paths: on macOS /var and /tmp are links into /private.
    return os.path.realpath(path)


def seatbelt_profile(
    *,
    workdir: Path,
    scratch: Path,
    mode: SandboxMode,
    readable: Sequence[Path],
    writable: Sequence[Path],
    network: Network,
    proxy_socket: Path | None,
) -> str:
    """The SBPL profile for one command.

    Reads are allowed everywhere (``readable`` is listed for the record).
    Writes: ``full_access`` anywhere; otherwise under ``scratch``, ``writable``
    and, in ``workspace_write``, ``workdir``; plus ``/dev/null``. Unix sockets
    may be bound and reached under those writable folders. Network: ``deny``
    nothing more; ``allow_list`` only ``proxy_socket`` (required); ``open`` all.
    """
    roots = [scratch, *writable] + ([workdir] if mode == "workspace_write" else [])
    places = " ".join(f"(subpath {sbpl_string(_real(root))})" for root in roots)
    lines = [
        "(version 1)",
        "(deny default)",
        "; Programs run and fork; children inherit this profile.",
        "(allow process-exec)",
        "(allow process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow process-info* (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow user-preference-read)",
        "; User lookups (getpwuid) and Python's multiprocessing locks.",
        '(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))',
        "(allow ipc-posix-sem)",
        "(allow file-read*)",
    ]
    if readable:
        reads = " ".join(f"(subpath {sbpl_string(_real(path))})" for path in readable)
        lines.append(f"(allow file-read* {reads})")
    devices = " ".join(f"(literal {sbpl_string(device)})" for device in _DEVICES)
    lines.append(f'(allow file-write-data {devices} (regex #"^/dev/fd/[0-9]+$"))')
    lines.append(
        "(allow file-write*)" if mode == "full_access" else f"(allow file-write* {places})"
    )
    lines += [
        "(allow system-socket (socket-domain AF_UNIX))",
        f"(allow network-bind (local unix-socket {places}))",
        f"(allow network-outbound (remote unix-socket {places}))",
    ]
    if network == "allow_list":
        if proxy_socket is None:
            raise SandboxError("the allow_list network needs the proxy's socket")
        socket = sbpl_string(_real(proxy_socket))
        lines.append(f"(allow network-outbound (remote unix-socket (path-literal {socket})))")
    elif network == "open":
        services = " ".join(f"(global-name {sbpl_string(name)})" for name in _NETWORK_SERVICES)
        lines += ["(allow network*)", "(allow system-socket)", f"(allow mach-lookup {services})"]
    return "\n".join(lines) + "\n"


def seatbelt_argv(
    profile: str, argv: Sequence[str], *, executable: str = SANDBOX_EXEC
) -> list[str]:
    """The command line that runs ``argv`` under ``profile``."""
    return [executable, "-p", profile, *argv]


class SeatbeltSandbox(ContainedSandbox):
    """The macOS backend: ``sandbox-exec`` with a deny-by-default profile per command.

    The shared runner starts it, so the caps, the proxy and the teardown are
    those of every POSIX backend. ``sandbox_exec`` is replaceable only so the
    wiring can be tested off macOS.
    """

    backend_name = SEATBELT
    denies_network = True
    """The profile closes the network; ``allow_list`` opens only the proxy's socket."""

    def __init__(
        self, config: SandboxConfig | None = None, *, sandbox_exec: str = SANDBOX_EXEC
    ) -> None:
        super().__init__(config)
        self._sandbox_exec = sandbox_exec

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether this machine runs ``sandbox-exec``, and why not when it does not.

        A trial run catches the case where the harness is itself sandboxed:
        a sandboxed process cannot apply a second profile.
        """
        if sys.platform != "darwin":
            return False, "sandbox-exec exists only on macOS"
        if not os.access(SANDBOX_EXEC, os.X_OK):
            return False, f"{SANDBOX_EXEC} is missing"
        trial = [SANDBOX_EXEC, "-p", "(version 1)(allow default)", "/usr/bin/true"]
        try:
            done = subprocess.run(trial, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"sandbox-exec did not run: {exc}"
        if done.returncode != 0:
            return False, f"sandbox-exec failed: {done.stderr.decode(errors='replace').strip()}"
        return True, "sandbox-exec runs"

    def wrap(self, command: Command) -> Wrapping:
        """``sandbox-exec -p PROFILE`` around the command, the profile written for it."""
        profile = seatbelt_profile(
            workdir=command.workdir,
            scratch=command.scratch,
            mode=command.mode,
            readable=command.readable,
            writable=command.writable,
            network=command.config.network,
            proxy_socket=command.proxy_socket,
        )
        return Wrapping(
            argv=tuple(seatbelt_argv(profile, command.argv, executable=self._sandbox_exec))
        )
