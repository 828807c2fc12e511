"""The one spelling a net target is matched in, and connected to.

One address has many spellings that reach the same socket: ``0x7f.1``,
``2130706433`` and ``[::ffff:127.0.0.1]`` all reach ``127.0.0.1``. Rules match
text, so every net target, and the host of every net glob that holds no
wildcard, is reduced to its canonical form before any rule sees it, and the
proxy and the checked transport connect to that form, never to the spelling
they were given:

- an IPv4 address in any spelling the C library's ``inet_aton`` reads (octal
  ``0177.0.0.1``, hex ``0x7f.0.0.1``, short ``127.1``, one integer
  ``2130706433``) is its dotted quad;
- an IPv6 address is its compressed lower-case form without brackets or zone
  (``[0:0::1%eth0]`` is ``::1``); one that carries an IPv4 address a connection
  is delivered to (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
  ``::a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``) is that IPv4 address;
- the unspecified addresses, which a connection takes to mean this machine, are
  the loopback ones: ``0.0.0.0`` is ``127.0.0.1`` and ``::`` is ``::1``;
- a name is lower case, IDNA-encoded (``bücher.de`` is ``xn--bcher-kva.de``)
  and without trailing dots.

A target is ``host``, ``host:port``, ``[ipv6]`` or ``[ipv6]:port``; a target
with more than one ``:`` and no brackets is a bare IPv6 host. Its canonical
form writes the port in decimal without leading zeros and puts an IPv6 host in
brackets when a port follows. Every function here takes any text and never
raises: text that is no address keeps its letters, lower-cased.
"""

from __future__ import annotations

import functools
import ipaddress
import re

__all__ = [
    "canonical_host",
    "canonical_net_glob",
    "canonical_net_target",
    "host_problem",
    "join_net_target",
    "split_net_target",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAME = re.compile(r"[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*")
_NUMERIC_LOOKING = re.compile(r"[0-9a-fx.]+")
_INET_ATON_PART = re.compile(r"0x[0-9a-f]*|0[0-7]*|[1-9][0-9]*")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOOPBACK: dict[int, Address] = {
    4: ipaddress.IPv4Address("127.0.0.1"),
    6: ipaddress.IPv6Address("::1"),
}
_MAX_NAME = 253


def canonical_host(host: str) -> str:
    """The canonical form of one host (no port): an address's one spelling, or the name's."""
    text = host.strip().lower()
    if _ipv6_spelled(text):
        address = _ipv6(text)
        return text if address is None else str(address)
    name = _name(text)
    ipv4 = _ipv4(name)
    return name if ipv4 is None else str(_delivered(ipv4))


def canonical_net_target(target: str) -> str:
    """The canonical form of ``host``, ``host:port``, ``[ipv6]`` or ``[ipv6]:port``.

    ``[::FFFF:127.0.0.1]:0443`` is ``127.0.0.1:443``; ``Example.COM.`` is
    ``example.com``. Doing this twice changes nothing.
    """
    host, port = split_net_target(target.strip())
    return join_net_target(canonical_host(host), _port(port))


@functools.lru_cache(maxsize=4096)
def canonical_net_glob(glob: str) -> str:
    """``glob`` as it is matched against canonical targets.

    A glob whose host holds no wildcard is canonicalised as a target is
    (``0x7f.1:*`` is ``127.0.0.1:*``, ``[::1]`` is ``::1``), so a rule written
    with any spelling of an address means that address. A host with a wildcard
    is matched as written, lower-cased, without trailing dots and with each
    wildcard-free label IDNA-encoded: write addresses there as dotted quads
    (``127.*``), the form targets are matched in.
    """
    host, port = split_net_target(glob.strip())
    if "*" not in host and "?" not in host:
        return join_net_target(canonical_host(host), _port(port))
    return join_net_target(_name_glob(host), _port(port))


def host_problem(host: str) -> str | None:
    """Why ``host`` can be connected to neither as an address nor as a name; ``None`` if it can.

    A name is letters, digits, ``-`` and ``_`` in dot-separated labels. A host
    whose last label begins with a digit and that is made only of what an IPv4
    spelling is made of (``09.1``, ``1.2.3.4.5``) is refused rather than taken
    as a name: some resolver may read it as an address this module does not.
    """
    text = host.strip().lower()
    if _ipv6_spelled(text):
        return None if _ipv6(text) is not None else f"the host {host!r} is not an IPv6 address"
    name = _name(text)
    if _ipv4(name) is not None:
        return None
    if len(name) > _MAX_NAME or not _NAME.fullmatch(name):
        return f"the host {host!r} is neither an IP address nor a host name"
    if name.rpartition(".")[2][0].isdigit() and _NUMERIC_LOOKING.fullmatch(name):
        return f"the host {host!r} is spelled like an IPv4 address but is not one"
    return None


def split_net_target(target: str) -> tuple[str, str | None]:
    """The host of a target and its port text (``None``: no port), both as given."""
    if target.startswith("["):
        end = target.find("]")
        rest = target[end + 1 :]
        if end != -1 and (not rest or rest.startswith(":")):
            return target[: end + 1], rest[1:] if rest else None
        return target, None
    if target.count(":") == 1:
        host, _, port = target.partition(":")
        return host, port
    return target, None


def join_net_target(host: str, port: int | str | None) -> str:
    """``host:port`` (``host`` alone for no port), an IPv6 host put in brackets before a port."""
    if port is None:
        return host
    bracketed = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{bracketed}:{port}"


def _port(port: str | None) -> str | None:
    if port is None:
        return None
    text = port.strip()
    return (text.lstrip("0") or "0") if text.isascii() and text.isdigit() else text


def _ipv6_spelled(text: str) -> bool:
    return ":" in text or (text.startswith("[") and text.endswith("]"))


def _ipv6(text: str) -> Address | None:
    """The address an IPv6 spelling (brackets and zone allowed) delivers to, or ``None``."""
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    # A zone picks the interface, not the address: rules decide the address alone.
    try:
        address = ipaddress.IPv6Address(text.partition("%")[0])
    except ValueError:
        return None
    return _delivered(address)


def _delivered(address: Address) -> Address:
    """The address a connection to ``address`` reaches, in the family that reaches it."""
    if isinstance(address, ipaddress.IPv6Address):
        address = _embedded_ipv4(address) or address
    return _LOOPBACK[address.version] if address.is_unspecified else address


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for, where it stands for one host.

    IPv4-mapped addresses are IPv4 on a dual-stack socket; IPv4-compatible ones
    (``::a.b.c.d``, but not ``::`` or ``::1``) and the NAT64 well-known prefix
    (RFC 6052) name the IPv4 host itself. 6to4 (``2002::/16``) and Teredo carry
    the address of a relay or a site's router, not of the host reached, so they
    stay IPv6.
    """
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    value = int(address)
    if (value >> 32 == 0 and value > 1) or address in _NAT64:
        return ipaddress.IPv4Address(value & 0xFFFF_FFFF)
    return None


def _ipv4(text: str) -> ipaddress.IPv4Address | None:
    """The address ``text`` spells under ``inet_aton``'s rules, or ``None``.

    One to four parts, each decimal, octal (a leading ``0``) or hex (``0x``);
    the last fills the bytes the others leave (``127.1`` is ``127.0.0.1``).
    """
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values: list[int] = []
    for part in parts:
        if not _INET_ATON_PART.fullmatch(part):
            return None
        value = _part_value(part)
        if value is None:
            return None
        values.append(value)
    *leading, last = values
    if any(value > 0xFF for value in leading) or last >= 1 << (8 * (4 - len(leading))):
        return None
    number = last
    for index, value in enumerate(leading):
        number |= value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _part_value(part: str) -> int | None:
    """One ``inet_aton`` part's value; ``None`` past 32 bits (checked on the text, as leading
    zeros may be many and ``int`` refuses very long texts)."""
    if part.startswith("0x"):
        digits, base, widest = part[2:].lstrip("0"), 16, 8
    elif part.startswith("0"):
        digits, base, widest = part[1:].lstrip("0"), 8, 11
    else:
        digits, base, widest = part, 10, 10
    if len(digits) > widest:
        return None
    return int(digits, base) if digits else 0


def _name(text: str) -> str:
    """A name lower-cased as given, IDNA-encoded when not ASCII, without trailing dots."""
    name = _without_trailing_dots(text)
    if not name.isascii():
        name = _without_trailing_dots(_idna(name))
    return name or text


def _without_trailing_dots(text: str) -> str:
    """``text`` without the dots and blanks it ends with, in any mix."""
    while (trimmed := text.rstrip(".").rstrip()) != text:
        text = trimmed
    return text


def _name_glob(glob: str) -> str:
    text = glob.lower()
    if ":" in text or "[" in text:
        return text
    stripped = text.rstrip(".")
    if stripped and stripped[-1] not in "*?":  # "*." keeps its dot: it must not become "*"
        text = stripped
    labels = text.split(".")
    return ".".join(
        label if label.isascii() or "*" in label or "?" in label else _idna(label)
        for label in labels
    )


def _idna(text: str) -> str:
    """``text`` IDNA-encoded as httpx2 encodes a URL's host; unchanged if it cannot be."""
    import idna  # httpx2's own dependency, loaded only for a name that is not ASCII

    try:
        return idna.encode(text, uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return text
