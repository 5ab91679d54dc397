"""Terminal-safe output: text the CLI prints can colour the terminal, never drive it.

Titles, headings, bodies and file names come from files that anyone may have written. An
escape sequence among them reaches the terminal verbatim: OSC 52 writes the clipboard, OSC 0
the window title, CSI moves the cursor over lines already shown or asks the terminal to type
an answer into the shell. :func:`install` wraps ``sys.stdout`` and ``sys.stderr`` once, so
everything the CLI prints (click, Rich, print) is cleaned in this one place, whatever command
printed it. :func:`one_line` is for a name shown inside a line, where a newline would forge
the next line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO, cast

# SGR (colour and weight: what click.style and Rich emit) is the one sequence kept: it cannot
# move the cursor, write anything or make the terminal answer. Also matched: CRLF, every other
# C0 control but tab and newline, DEL, and C1 (U+009B and U+009D are 8-bit CSI and OSC).
_UNSAFE = re.compile(r"\x1b\[[0-9;]*m|\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_LINE_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _replace(match: re.Match[str]) -> str:
    text = match.group(0)
    if text.startswith("\x1b["):
        return text
    if text == "\r\n":
        return "\n"
    # shown, not dropped: a reader sees that something was there; and the \u form keeps JSON
    # output valid and equal (raw C1 and DEL can only stand inside JSON strings)
    return f"\\u{ord(text):04x}"


def clean(text: str) -> str:
    """``text`` with every control character but newline, tab and SGR shown as ``\\uXXXX``."""
    return _UNSAFE.sub(_replace, text)


def one_line(text: str) -> str:
    """A name for one line of output: newlines, tabs and other controls escaped visibly."""
    return _LINE_UNSAFE.sub(lambda m: _NAMED.get(m.group(0), f"\\x{ord(m.group(0)):02x}"), text)


class _SafeStream:
    """A text stream that cleans what is written, then passes it to the real one."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes for a binary stream by writing b""
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.raw.write(clean(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, buffer, encoding, ...
        return getattr(self.raw, name)


def install() -> None:
    """Clean everything written to ``sys.stdout`` and ``sys.stderr`` from now on."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _SafeStream):
            setattr(sys, name, cast(TextIO, _SafeStream(stream)))


def raw(stream: TextIO) -> TextIO:
    """The stream under the cleaning wrapper (for a progress bar's own cursor control)."""
    return stream.raw if isinstance(stream, _SafeStream) else stream
