"""A database URL as messages and suggested commands show it: never with its password."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["without_password"]


def without_password(url: str) -> str:
    """``url`` with no password in it: neither in its user part nor as a ``password=``
    parameter. A command suggested with it works where the password comes from the
    environment (``PGPASSWORD``) or ``~/.pgpass``, as libpq looks for it."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user = f"{parts.username}@" if parts.username else ""
        netloc = user + netloc.rsplit("@", 1)[1]
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "password"]
    return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))
