"""Text from a run, made safe to print: no markup and no terminal control sequences."""

from __future__ import annotations

import re

from rich.markup import escape as _escape_markup

__all__ = ["escape", "shown"]

# C0 controls but tab and newline, DEL, and the C1 controls (``\x9b`` is a CSI too).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` with each control character but tab and newline written as ``\\xNN``.

    What a run stored (the model's arguments, a command's output, a goal, a
    diff waiting for approval) is shown, never obeyed: an escape sequence in it
    would otherwise clear the screen, retitle the terminal or erase the lines
    around it, hiding them from the person reading.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def escape(text: str) -> str:
    """``text`` for ``Text.from_markup``: markup escaped, control characters :func:`shown`."""
    return _escape_markup(shown(text))
