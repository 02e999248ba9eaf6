"""A reader that runs in a child process, for libraries that crash or loop on a corrupt file
instead of failing (libhdf5 1.10 does both: tests/e2e/fault/data). The Python counterpart of
src/io/library_guard.hpp: the child does the library's work and sends what it read through a
pipe; a child that dies by a signal becomes one line, "<file>: libhdf5 crashed (SIGSEGV) <while
doing what>: the file is corrupt", and one that makes no progress for BLOCKMM_LIBRARY_TIMEOUT
seconds (default 60) before its header is sent is ended and reported the same way: exit code 3,
never a crash or a hang of the tool.

The child's side: `work(channel)` calls channel.stage(text) before each step that may fail
inside the library, channel.send(tag, *buffers) for what it read, and raises FormatError for a
bad file; MemoryError reaches the parent as MemoryError. Tags are single bytes chosen by the
caller, except the reserved S (stage), E (format error), M (out of memory), X (other failure)
and D (done).
"""
import fcntl
import os
import select
import signal
import struct
import time

import numpy as np

from .atomic_output import register_child, unregister_child
from .errors import FormatError, quoted

FRAME = struct.Struct("<cQ")  # tag, payload bytes
_SIGNAL_CAUSES = {signal.SIGSEGV: "crashed (SIGSEGV)", signal.SIGBUS: "crashed (SIGBUS)",
                  signal.SIGFPE: "crashed (SIGFPE)", signal.SIGILL: "crashed (SIGILL)",
                  signal.SIGABRT: "aborted (SIGABRT)"}


def library_timeout_setting():
    """BLOCKMM_LIBRARY_TIMEOUT as the C++ tools read it: whole seconds 1 to 86399 (at most 19
    digits), None when unset or empty, ValueError for anything else."""
    digits = os.environ.get("BLOCKMM_LIBRARY_TIMEOUT", "")
    if not digits:
        return None
    if digits.isdigit() and digits.isascii() and len(digits) <= 19:
        value = int(digits)
        if 1 <= value <= 86399:
            return value
    raise ValueError(f"BLOCKMM_LIBRARY_TIMEOUT='{quoted(digits)}': expected seconds 1..86399")


def metadata_timeout_seconds():
    """BLOCKMM_LIBRARY_TIMEOUT, or 60 (the tools refuse a bad value when they start: cli.py)."""
    try:
        return library_timeout_setting() or 60
    except ValueError:
        return 60


class _ChildChannel:
    def __init__(self, fd):
        self.fd = fd
        self.current = "reading the file's structure"

    def _write(self, data):
        view = memoryview(data).cast("B")
        while len(view):
            view = view[os.write(self.fd, view):]

    def send(self, tag, *buffers):
        views = [memoryview(np.ascontiguousarray(b) if isinstance(b, np.ndarray) else b).cast("B") for b in buffers]
        self._write(FRAME.pack(tag, sum(len(v) for v in views)))
        for view in views:
            self._write(view)

    def stage(self, text):
        self.current = text
        self.send(b"S", text.encode("utf-8", "surrogateescape"))


def _child(work, fd, parent):
    """The child's life: no parent handlers (a SIGTERM to the group must not run the parent's
    clean-up twice), death with the parent (a SIGKILLed tool leaves no reader looping in libhdf5),
    the work, then _exit whatever happened."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(0)
    _silence_stderr()
    channel = _ChildChannel(fd)
    try:
        work(channel)
        channel.send(b"D")
    except FormatError as error:
        _try(channel.send, b"E", str(error).encode("utf-8", "surrogateescape"))
    except MemoryError:
        _try(channel.send, b"M")
    except BrokenPipeError:
        pass
    except BaseException as error:  # noqa: BLE001: the parent reports it
        _try(channel.send, b"X", f"{type(error).__name__}: {error}".encode("utf-8", "surrogateescape"))
    finally:
        os._exit(0)


def _silence_stderr():
    """Everything the child has to say goes through the channel; what a crashing library or the C
    library prints on its way down (glibc's "munmap_chunk(): invalid pointer" before an abort) would
    be a second line beside the parent's one, so the child's stderr is /dev/null."""
    try:
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    os.dup2(null, 2)
    os.close(null)


def _try(send, *args):
    try:
        send(*args)
    except OSError:
        pass


class GuardedReader:
    """Starts `work` in a child; frames() yields (tag, payload as a numpy uint8 array) until the
    child says it is done. `path` and `library` name the file and the library in messages."""

    def __init__(self, path, library, work):
        self.pid, self.fd = 0, -1
        self.path, self.library = path, library
        self.stage = "reading the file's structure"
        self.timeout = metadata_timeout_seconds()
        self.patient = False  # no timeout once the caller has what the metadata gave
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:  # a larger pipe: fewer reads and writes for the same bytes (64 KiB is the default)
            fcntl.fcntl(write_end, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        except OSError:
            pass
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover (the child's coverage is the parent's result)
            os.close(read_end)
            _child(work, write_end, parent)
        register_child(self.pid)
        os.close(write_end)
        self.fd = read_end

    def close(self):
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            unregister_child(self.pid)
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()

    def _read(self, view):
        """Fills `view` from the pipe; False at the end of the stream before anything was read."""
        view = memoryview(view).cast("B")
        done = 0
        while done < len(view):
            if not self.patient:
                deadline = time.monotonic() + self.timeout
                while not select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    if time.monotonic() >= deadline:
                        self._fail(f"made no progress for {self.timeout} s", " (BLOCKMM_LIBRARY_TIMEOUT sets the limit)")
            got = os.readv(self.fd, [view[done:]])
            if got == 0:
                if done == 0:
                    return False
                self._died()
            done += got
        return True

    def _fail(self, cause, note=""):
        self.close()
        raise FormatError(f"{self.path}: {self.library} {cause} {self.stage}: the file is corrupt{note}")

    def _died(self):
        _, status = os.waitpid(self.pid, 0)
        unregister_child(self.pid)
        self.pid = 0
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            if number in _SIGNAL_CAUSES:
                self._fail(_SIGNAL_CAUSES[number])
            self.close()
            raise RuntimeError(f"{self.path}: the process reading it (for {self.library}) was ended by signal "
                               f"{signal.Signals(number).name} {self.stage}")
        self.close()
        raise RuntimeError(f"{self.path}: the process reading it (for {self.library}) ended early {self.stage}")

    def frames(self):
        head = np.empty(FRAME.size, dtype=np.uint8)
        while True:
            if not self._read(head):
                self._died()
            tag, size = FRAME.unpack(head.tobytes())
            payload = np.empty(size, dtype=np.uint8)
            if size and not self._read(payload):
                self._died()
            if tag == b"S":
                self.stage = payload.tobytes().decode("utf-8", "surrogateescape")
            elif tag == b"D":
                self.close()
                return
            elif tag == b"E":
                self.close()
                raise FormatError(payload.tobytes().decode("utf-8", "surrogateescape"))
            elif tag == b"M":
                self.close()
                raise MemoryError
            elif tag == b"X":
                self.close()
                raise RuntimeError(payload.tobytes().decode("utf-8", "surrogateescape"))
            else:
                yield tag, payload
