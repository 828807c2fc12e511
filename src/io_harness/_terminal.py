"""Text from a run, made inert for a terminal: every character that could act on the
terminal, reorder a line or hide what it says is written as a visible escape.

What a run stored (the model's words and arguments, a command's output, a
path, a diff waiting for approval) is shown, never obeyed. An escape sequence
in it would otherwise clear the screen, retitle the window or redraw the
lines around it; a bidirectional override would make ``txt.exe`` read as
``exe.txt``; a zero-width or other invisible character would make two
different texts look the same. The CLI and the approval prompt both print
through :func:`shown`, so one list says what is escaped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["escaped_json", "quoted", "shown", "shown_argv"]

_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f"
"""C0 controls but tab and newline, DEL, and the C1 controls (``\\x9b`` is a CSI too,
``\\x9d`` an OSC, ``\\x85`` a line break)."""

_INVISIBLE = (
    # Format characters (Unicode category Cf): the bidirectional marks, embeddings,
    # overrides and isolates (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069),
    # zero-width space and joiners (U+200B-U+200D), the word joiner and invisible
    # operators (U+2060-U+2064), the byte-order mark (U+FEFF), tags (U+E0000-U+E007F).
    r"\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    r"\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    r"\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    # The line and paragraph separators, which some terminals break a line at.
    r"\u2028\u2029"
    # The rest of what Unicode says renders as nothing (Default_Ignorable_Code_Point):
    # Hangul fillers, Mongolian selectors, variation selectors (but U+FE0E and U+FE0F,
    # below), unassigned code points kept for more of them.
    r"\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0d\uffa0"
    r"\ufff0-\ufff8\U000e0000-\U000e0fff"
    # Lone surrogates (from bytes decoded with ``surrogateescape``): no terminal
    # encoding can write one, so printing it would fail.
    r"\ud800-\udfff"
)

_PRESENTATION = r"\ufe0e\ufe0f"
"""The text and emoji presentation selectors (``⚠️`` is U+26A0 U+FE0F). One after a
character is a glyph's style and is kept; one anywhere else (a run of them, one after
a space or an escaped character) could only carry hidden data, and is escaped."""


def _pattern(controls: str) -> re.Pattern[str]:
    hidden = controls + _INVISIBLE
    stray = rf"(?<![^{hidden}{_PRESENTATION}\s])[{_PRESENTATION}]"
    return re.compile(rf"[{hidden}]|{stray}")


_IN_LINES = _pattern(_CONTROLS)
_IN_ONE_LINE = _pattern(_CONTROLS + r"\t\n")
_IN_JSON = _pattern(r"\x7f-\x9f")
"""In JSON text a serializer has escaped C0 controls inside strings (RFC 8259 requires
it); those outside strings are its layout (newlines and indentation), kept."""


_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
"""The escapes Python names, written as it writes them."""


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)  # JSON writes an astral character as a pair
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def shown(text: str, *, one_line: bool = False) -> str:
    """``text`` with each character that could act on a terminal or hide what it says
    written as its Python escape (``\\r``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``).

    Escaped: control characters but tab and newline, format characters
    (bidirectional controls, zero-width characters, the byte-order mark, tags),
    the line and paragraph separators, the other characters that render as
    nothing, a presentation selector that follows no character, and lone
    surrogates. ``one_line`` escapes tab and newline too, for a value that must
    not break its line (a path, an argument) and so pass for the lines after it.
    Nothing is dropped: every character escaped is still there, visibly.
    """
    pattern = _IN_ONE_LINE if one_line else _IN_LINES
    return pattern.sub(lambda found: _escape(found.group()), text)


def quoted(value: str) -> str:
    """``value`` as a Python string literal (``'my notes.md'``), every character
    :func:`shown` escapes escaped: visibly delimited, on one line, and it reads back
    as exactly ``value`` (``ast.literal_eval``)."""
    return shown(repr(value), one_line=True)


def shown_argv(argv: Sequence[str]) -> str:
    """A command's arguments as the process gets them: a list of :func:`quoted` strings
    (``['sh', '-c', 'echo hi']``), so an argument holding a space or a newline cannot
    pass for two."""
    return "[" + ", ".join(quoted(argument) for argument in argv) + "]"


def escaped_json(text: str) -> str:
    """JSON ``text`` with each character :func:`shown` escapes written as a ``\\uXXXX``
    escape: the same JSON to a parser, inert on a terminal.

    Serializers write DEL, C1 controls and format characters raw unless told to
    escape everything beyond ASCII; these are the only ones that need it. Such a
    character can only be inside a JSON string, where an escape means the same.
    """
    return _IN_JSON.sub(lambda found: _json_escape(found.group()), text)
