"""The failures the Python tools report, their exit codes (blockmm's: 0 ok, 1 other, 2 usage,
3 bad input, 4 output or I/O failure, 5 out of memory) and how a message is written: one line
on stderr whose file names keep their bytes (names are bytes on Linux; Python carries the
undecodable ones as surrogates) with control characters shown as \\xHH, as the C++ tools write them.
"""
import sys

USAGE, BAD_INPUT, OUTPUT_FAILURE, OUT_OF_MEMORY, OTHER = 2, 3, 4, 5, 1


class FormatError(ValueError):
    """A file that is not what it must be (bad input: the tools exit with code 3)."""


class UsageError(ValueError):
    """A wrong option or argument (exit code 2)."""


class OutputError(Exception):
    """The output could not be written (exit code 4)."""


def escape_controls(text):
    """`text` with control characters (below 0x20, and 0x7f) as \\xHH: one line whatever a name holds."""
    return "".join(c if " " <= c != "\x7f" else f"\\x{ord(c):02x}" for c in text)


QUOTED_VALUE_BYTES = 160  # src/core/error.hpp kQuotedValueBytes


def quoted(text, limit=QUOTED_VALUE_BYTES):
    """A value the user gave (an option's, a variable's, a field of a file) fit to quote in a
    one-line message: its first `limit` bytes (UTF-8, cut at a character boundary) and "…" where
    it is longer, control characters as \\xHH (src/core/error.hpp quoted_value, rule for rule)."""
    text = str(text)
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return escape_controls(text)
    cut = limit
    while cut > 0 and raw[cut] & 0xC0 == 0x80:  # not inside a UTF-8 character
        cut -= 1
    return escape_controls(raw[:cut].decode("utf-8", "surrogateescape")) + "\u2026"


def printable_ascii(text):
    """`text` (str with surrogate-escaped bytes, or bytes) as ASCII: other bytes as \\xHH. For
    text written into files that other programs parse (a Matrix Market comment)."""
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if 0x20 <= b < 0x7f and b != 0x5c else f"\\x{b:02x}" for b in raw)


def say(line, stream=None):
    """Writes one line to stderr: surrogate-escaped bytes go out as the bytes they stand for."""
    stream = stream or sys.stderr
    text = escape_controls(line) + "\n"
    buffer = getattr(stream, "buffer", None)
    try:
        if buffer is not None:
            stream.flush()
            buffer.write(text.encode("utf-8", "surrogateescape"))
            buffer.flush()
        else:  # a text stream without bytes beneath (a test's StringIO)
            stream.write(text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
    except (OSError, ValueError):
        pass  # stderr itself is gone: nothing else can be told
