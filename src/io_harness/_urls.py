"""A URL or connection string as messages, logs and the store show it: never with a credential.

:func:`without_password` is the one credential-free spelling of a location;
:func:`redacted` cleans a driver's message that may quote a piece of one.
Credentials are looked for where URLs and libpq connection strings carry
them: the user part of a URL (its password always; its user name too, except
a database URL's, which names a role that connecting needs), and every
parameter, in the query, the fragment or a ``key=value`` connection string,
whose name says it holds a secret (``password``, ``sslpassword``,
``api_key``, ``token``, ``X-Amz-Signature``, ...), however its name is
escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit

__all__ = [
    "UNPARSEABLE",
    "looks_like_connection_string",
    "redacted",
    "without_password",
    "without_secret_parameters",
]

UNPARSEABLE = "<unparseable URL>"
"""What is shown of a URL whose credentials cannot be told apart from the rest."""
_UNPARSEABLE_DSN = "<unparseable connection string>"
_HIDDEN = "…"

_DATABASE_SCHEMES = frozenset({"postgresql", "postgres"})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_HOST = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(:[0-9]*)?")
"""A host with its port if any (``db:5432``, ``[::1]:5432``); a database URL may name several."""
_SECRET_WORDS = (
    "pass", "pwd", "secret", "token", "auth", "cred", "key", "sig", "cookie", "session",
)  # fmt: skip
# libpq parameters whose names hold one of those words but whose values are a file's
# path or a list of methods, kept so that a suggested --store still connects the same way.
_NOT_SECRET = frozenset({"passfile", "sslkey", "requireauth", "targetsessionattrs"})
# libpq's keywords are words; any run of other characters is taken as one, so that a
# misspelt keyword holding a secret is still a parameter to leave out.
_KEYWORD = re.compile(r"\s*([^\s='\"/\\]+)\s*=\s*")


def without_password(location: str) -> str:
    """``location`` with no credential in it, whatever its shape.

    A URL keeps its scheme, host, path and harmless parameters; a database
    URL (``postgresql://``) keeps its user name too, so a command suggested
    with it works where the password comes from ``PGPASSWORD`` or
    ``~/.pgpass``. A URL whose parts cannot be told apart (it does not parse,
    its port is not a number, or it holds an ``@`` past its host: a password
    with an unescaped ``/``, ``?`` or ``#``) is ``scheme://<unparseable URL>``.
    A libpq ``key=value`` connection string loses its secret parameters
    (``<unparseable connection string>`` when its quotes do not close).
    Anything else (a file's path) is returned as it is.
    """
    if "://" in location:
        return _url_without_credentials(location)
    if looks_like_connection_string(location):
        return _connection_string_without_credentials(location)
    return location


def looks_like_connection_string(text: str) -> bool:
    """Whether ``text`` is written as a libpq connection string (``host=db dbname=runs``)."""
    return "://" not in text and _KEYWORD.match(text) is not None


def redacted(text: str, location: str) -> str:
    """``text`` (a driver's error message, say) with nothing of ``location``'s credentials.

    Drivers quote what they could not parse (libpq: ``invalid percent-encoded
    token: "PW%zz"``), which may be a credential or the whole URL: every quoted
    piece of ``location`` that its credential-free spelling does not hold is
    replaced by ``…``, and so is each credential ``location`` holds, as written
    or percent-decoded, wherever else it appears.
    """
    shown = without_password(location)
    text = _without_quoted_pieces(text.replace(location, shown), location, shown)
    for secret in sorted(_credentials(location), key=len, reverse=True):
        # A credential of one or two characters would blank out ordinary words; drivers
        # quote what they show of a location, and the pass above covers that.
        if len(secret) >= 3:
            text = text.replace(secret, _HIDDEN)
    return text


def _without_quoted_pieces(text: str, location: str, shown: str) -> str:
    """``text`` with each quoted piece of ``location`` that ``shown`` does not hold as ``…``.

    A piece runs to the furthest closing quote that keeps it a piece of
    ``location``, since a credential may hold the quote character itself.
    """
    whole = f"{location}\n{unquote(location)}"
    kept: list[str] = []
    at = 0
    while at < len(text):
        quote = text[at]
        end = -1
        if quote in "\"'":
            close = text.find(quote, at + 1)
            while close != -1:
                # Python quotes a backslash twice (libpq's host in psycopg's message).
                said = text[at + 1 : close]
                piece = next((p for p in (said, said.replace("\\\\", "\\")) if p in whole), None)
                if piece is None:
                    break  # nor is any longer piece that begins the same
                if piece and piece not in shown:
                    end = close
                close = text.find(quote, close + 1)
        if end == -1:
            kept.append(quote)
            at += 1
        else:
            kept.append(f"{quote}{_HIDDEN}{quote}")
            at = end + 1
    return "".join(kept)


# -- URLs ------------------------------------------------------------------------------------


def _url_without_credentials(url: str) -> str:
    scheme = url.partition("://")[0]
    if _SCHEME.fullmatch(scheme) is None:
        return UNPARSEABLE
    try:
        parts = urlsplit(url)
    except ValueError:  # a bad IPv6 literal, say
        return f"{scheme}://{UNPARSEABLE}"
    if "@" in parts.path + parts.query + parts.fragment:
        return f"{scheme}://{UNPARSEABLE}"
    userinfo, at, host = parts.netloc.rpartition("@")
    if "@" in userinfo or not all(_HOST.fullmatch(one) for one in host.split(",")):
        # Two "@" (libpq ends the user part at the first, Python at the last), or a port
        # that is not a number: a piece of a password may be taken for the host.
        return f"{scheme}://{UNPARSEABLE}"
    user = userinfo.partition(":")[0] if at and parts.scheme in _DATABASE_SCHEMES else ""
    shown = f"{scheme}://{user}@{host}" if user else f"{scheme}://{host}"
    shown += parts.path
    if query := without_secret_parameters(parts.query):
        shown += f"?{query}"
    if fragment := without_secret_parameters(parts.fragment):
        shown += f"#{fragment}"
    return shown


def without_secret_parameters(text: str) -> str:
    """``a=1&password=x;b=2`` as ``a=1;b=2``: each ``&`` or ``;`` separated parameter whose
    name says it is a secret left out, the rest as written."""
    pieces = re.split(r"([&;])", text)
    kept: list[str] = []
    for index in range(0, len(pieces), 2):
        if _secret_name(pieces[index].partition("=")[0]):
            continue
        if kept:
            kept.append(pieces[index - 1])
        kept.append(pieces[index])
    return "".join(kept)


def _secret_name(name: str) -> bool:
    """Whether a parameter so named holds a secret, its name percent-decoded, its case and
    punctuation ignored (``API-Key``, ``api_key``, ``%61pikey`` are one name)."""
    plain = re.sub(r"[^a-z0-9]", "", unquote(name).lower())
    return plain not in _NOT_SECRET and any(word in plain for word in _SECRET_WORDS)


# -- libpq connection strings --------------------------------------------------------------


def _connection_string_without_credentials(text: str) -> str:
    try:
        parameters = list(_parameters(text))
    except ValueError:
        return _UNPARSEABLE_DSN
    return " ".join(raw for name, _, raw in parameters if not _secret_name(name))


def _parameters(text: str) -> Iterator[tuple[str, str, str]]:
    """Each ``keyword=value`` of a libpq connection string: its name, its value, as written.

    A value is a run of characters other than whitespace, or is quoted with
    ``'``; a backslash escapes the next character in either. A quote that
    does not close, or a word that is not ``keyword=``, is a ValueError.
    """
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            return
        keyword = _KEYWORD.match(text, at)
        if keyword is None:
            raise ValueError(f"not a keyword=value at {at}")
        start, at = keyword.start(1), keyword.end()
        value: list[str] = []
        quoted = text.startswith("'", at)
        at += quoted
        while at < len(text) and (quoted or not text[at].isspace()):
            if text[at] == "\\" and at + 1 < len(text):
                value.append(text[at + 1])
                at += 2
            elif quoted and text[at] == "'":
                quoted = False
                at += 1
                break
            else:
                value.append(text[at])
                at += 1
        if quoted:
            raise ValueError("a quote that does not close")
        yield keyword.group(1), "".join(value), text[start:at]


# -- what redacted() looks for ---------------------------------------------------------------


def _credentials(location: str) -> set[str]:
    """Every credential ``location`` holds, as written and percent-decoded, found even where
    it does not parse: a URL's password (and user name, but a database URL's), and secret
    parameters' values."""
    found: set[str] = set()
    for start in _URL_START.finditer(location):
        rest = location[start.end() :]
        userinfo, at, _ = rest.rpartition("@")
        if at:
            user, colon, password = userinfo.partition(":")
            if colon:
                # Each piece between ":" and "@" too: parsers differ on where a password ends.
                found.update({userinfo, password, *re.split(r"[:@]", password)})
            if start.group().removesuffix("://").lower() not in _DATABASE_SCHEMES:
                found.update({userinfo, user})
    for match in re.finditer(r"([^\s=&;#?/]*)=('(?:\\.|[^'\\])*'|[^\s&;#]*)", location):
        if _secret_name(match.group(1)):
            value = match.group(2)
            found.update({value, value.strip("'")})
    return {form for secret in found if secret for form in (secret, unquote(secret))}
