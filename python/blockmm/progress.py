"""Progress of a long conversion on stderr, in blockmm's two styles (src/console/progress.hpp): a
line redrawn in place on a terminal (shown after a second, erased at the end), or plain lines
every BLOCKMM_PROGRESS_INTERVAL seconds (default 5) in logs and pipes. Counted in blocks read,
over every pass the conversion makes of its input.
"""
import os
import sys
import time

from .errors import UsageError, quoted

BAR_DELAY = 1.0  # seconds before a bar is drawn: shorter runs show none


def progress_interval():
    """BLOCKMM_PROGRESS_INTERVAL: seconds in (0, 86400], default 5; anything else is a usage error."""
    text = os.environ.get("BLOCKMM_PROGRESS_INTERVAL", "")
    if not text:
        return 5.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise UsageError(f"BLOCKMM_PROGRESS_INTERVAL='{quoted(text)}' must be a number of seconds in (0, 86400]")
    return value


def duration(seconds):
    """'0:07', '12:34', '1:02:03'."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def choose_style(requested, stream=None):
    stream = stream or sys.stderr
    if requested != "auto":
        return requested
    terminal = hasattr(stream, "isatty") and stream.isatty() and os.environ.get("TERM", "dumb") != "dumb"
    return "bar" if terminal else "lines"


class Progress:
    def __init__(self, tool, what, total, style="auto", stream=None, interval=None):
        self.stream = stream or sys.stderr
        self.tool, self.what, self.total = tool, what, max(1, int(total))
        self.style = choose_style(style, self.stream)
        self.interval = progress_interval() if interval is None else interval
        self.start = time.monotonic()
        self.done = 0
        self.next_show = self.start + (BAR_DELAY if self.style == "bar" else self.interval)
        self.drawn = False

    def advance(self, count):
        self.done += int(count)
        if self.style == "none":
            return
        now = time.monotonic()
        if now >= self.next_show:
            self._show(now)
            self.next_show = now + (0.2 if self.style == "bar" else self.interval)

    def _line(self, now):
        share = min(1.0, self.done / self.total)
        elapsed = now - self.start
        eta = f", ETA {duration(elapsed * (1 - share) / share)}" if share > 0.01 else ""
        return f"{self.tool}: {self.what}: {100 * share:3.0f}% after {duration(elapsed)}{eta}"

    def _show(self, now):
        try:
            if self.style == "bar":
                self.stream.write("\r" + self._line(now) + "\x1b[K")
                self.drawn = True
            else:
                self.stream.write(self._line(now) + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            self.style = "none"

    def finish(self):
        if self.drawn:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self.drawn = False


class CountedSource:
    """A block source whose passes advance a Progress by the blocks they hand out."""

    def __init__(self, source, progress):
        self.source, self.progress = source, progress
        self.path, self.n, self.m, self.nnzb, self.width = source.path, source.n, source.m, source.nnzb, source.width
        self.nonzero_counts = getattr(source, "nonzero_counts", None)

    def pieces(self, piece_bytes=None):
        for piece in self.source.pieces(piece_bytes):
            yield piece
            self.progress.advance(len(piece[0]))
