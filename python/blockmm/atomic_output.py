"""Outputs written as the C++ tools write theirs (src/io/atomic_output.cpp, docs/design.md
departure 8): a temporary file beside the target, created with O_EXCL | O_NOFOLLOW and kept open
until it is renamed over the target, every write going through that descriptor (never a name
reopened: whoever can write the folder cannot redirect a write through a swapped-in link). All
names are used relative to the folder's descriptor, opened once.

- The temporary is `.<name>.blockmm-tmp.lk.<host>.<pid>.XXXXXX`, the C++ tools' name (the grammar of
  src/io/path_names.hpp, mirrored by the constants below), and its creator holds the C++ tools'
  liveness lock on it (an open file description lock on byte 2^62, src/io/stale_temporaries.hpp)
  while it lives, so that either tool's next run on the same output removes what a SIGKILLed run
  left, and says so: only a marked ("lk.") regular file of this user, unchanged for 10 minutes,
  whose lock it can take, in a folder whose file system shows locks to every host (and, for this
  host's names, whose process is not one it can see). Where the lock cannot be taken, the
  temporary takes the unmarked name `.<name>.blockmm-tmp.<host>.<pid>.XXXXXX`, as blockmm's
  versions before the lock named theirs: no sweep removes those.
- It is created with mode 0666 and the umask (and default ACLs) applied by the kernel, kept 0600
  while partial; at the commit it takes the existing target's mode, or the mode it was created
  with: a new output is 0644 under umask 022, as the C++ tools' outputs are.
- Before the rename the name must still be the file this run created (lstat against fstat);
  otherwise nothing is renamed and the run fails (exit 4). The folder entry is synced after.
- SIGINT, SIGTERM, SIGHUP and SIGQUIT remove the temporary (and end the reader processes of
  guarded_reader.py) before the signal takes its default course; SIGXFSZ is ignored so that a
  file-size limit is an error (EFBIG, exit 4), not a silent death.
- An existing read-only target is not replaced; a character device (/dev/null) is written in place.
"""
import fcntl
import os
import secrets
import signal
import socket
import stat
import struct
import time

from .errors import OutputError, UsageError, say

# src/io/path_names.hpp: "." <name> MARKER [LOCKED_FLAG] <host> "." <pid> "." <RANDOM_CHARS>
MARKER = b".blockmm-tmp."  # kTemporaryMarker
LOCKED_FLAG = b"lk."  # kLockedTemporaryFlag
RANDOM_CHARS = 6  # kTemporaryRandomChars
PID_DIGITS = 10  # kTemporaryPidDigits
HOST_LENGTH = 32  # kTemporaryHostChars
NAME_EXTRA = 1 + len(MARKER) + len(LOCKED_FLAG) + 1 + PID_DIGITS + 1 + RANDOM_CHARS  # kTemporaryNameExtra
NAME_MAX = 255
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
HOST_CHARS = frozenset((ALPHABET + "-_").encode())
CLEANUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
LIVENESS_LOCK_OFFSET = 1 << 62  # src/io/stale_temporaries.hpp kLivenessLockOffset
STALE_TEMPORARY_SECONDS = 600  # kStaleTemporarySeconds

_temporaries = {}  # id(output) -> AtomicOutput, removed by a signal
_children = set()  # pids of reader processes, ended by a signal


def register_child(pid):
    _children.add(pid)


def unregister_child(pid):
    _children.discard(pid)


def _remove_and_reraise(number, frame):
    for pid in list(_children):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for output in list(_temporaries.values()):
        output.abandon()
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


def install_cleanup_handlers():
    """For the tools (a library leaves the process's signals alone): temporaries go on a signal.
    A signal the tool was started with ignored stays ignored (`nohup` must keep working)."""
    for number in CLEANUP_SIGNALS:
        if signal.getsignal(number) != signal.SIG_IGN:
            signal.signal(number, _remove_and_reraise)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _host_tag():
    name = socket.gethostname().split(".")[0][:HOST_LENGTH]
    tag = "".join(c if c.isascii() and (c.isalnum() or c == "-") else "_" for c in name)
    return tag.encode("ascii") or b"localhost"


def _liveness_lock(fd, kind):
    """Takes the liveness lock (F_WRLCK: a live temporary's creator; F_RDLCK: the sweep's test)
    on `fd`; OSError where it is held or the file system takes no locks. struct flock: l_type,
    l_whence, l_start, l_len, l_pid (0 for open file description locks)."""
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, LIVENESS_LOCK_OFFSET, 1, 0))


# statfs magic numbers -> (type, network): as src/io/stale_temporaries.cpp knows them.
_FILE_SYSTEMS = {0xEF53: ("ext4", False), 0x58465342: ("xfs", False), 0x9123683E: ("btrfs", False),
                 0x01021994: ("tmpfs", False), 0x858458F6: ("ramfs", False), 0x794C7630: ("overlay", False),
                 0x2FC12FC1: ("zfs", False), 0xF2F52010: ("f2fs", False), 0x6969: ("nfs", True),
                 0x0BD00BD0: ("lustre", True), 0x47504653: ("gpfs", False), 0x00C36400: ("ceph", False),
                 0xFF534D42: ("cifs", True), 0xFE534D42: ("smb3", True)}


def _mount_options(device):
    """The mount and super options of the mount of `device` (/proc/self/mountinfo), or None."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as info:
        for line in info:
            fields = line.split()
            if len(fields) > 6 and fields[2] == wanted and "-" in fields[6:]:
                dash = fields.index("-", 6)
                return set(fields[5].split(",") + (fields[dash + 3].split(",") if len(fields) > dash + 3 else []))
    return None


def locks_shared_between_hosts(kind, options):
    """src/io/stale_temporaries.hpp locks_shared_between_hosts, rule for rule."""
    if kind in ("ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "ramfs", "overlay", "zfs", "f2fs"):
        return True
    if kind in ("nfs", "nfs4"):
        return not options & {"nolock", "local_lock=posix", "local_lock=all"}
    if kind == "lustre":
        return "flock" in options
    if kind in ("cifs", "smb3"):
        return "nobrl" not in options
    return kind in ("gpfs", "ceph")


def _shares_locks(dir_fd):
    """Whether the folder's file system shows every host's locks to every host (its statfs magic
    number, and for a network file system its mount options); any other keeps its temporaries."""
    import ctypes

    buffer = ctypes.create_string_buffer(256)  # struct statfs: f_type (a long) first
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.fstatfs(dir_fd, buffer) != 0:
        return False
    magic = ctypes.c_ulong.from_buffer(buffer).value & 0xFFFFFFFF
    kind, network = _FILE_SYSTEMS.get(magic, (None, False))
    if kind is None:
        return False
    try:
        options = _mount_options(os.fstat(dir_fd).st_dev) if network else set()
    except OSError:
        return False
    return options is not None and locks_shared_between_hosts(kind, options)


def folder_shares_locks(path):
    """Whether folder `path`'s file system is one the sweep works on (src/io/stale_temporaries.hpp
    folder_shares_locks)."""
    try:
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return _shares_locks(dir_fd)
    finally:
        os.close(dir_fd)


def _is_host_tag(tag):
    return 0 < len(tag) <= HOST_LENGTH and all(c in HOST_CHARS for c in tag)


def _process_here(pid):
    """Whether a process of that id is one this process can see (or may not ask about)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # none of that id, or a number past any pid
        return False
    except OSError:
        return True
    return True


def _fnv1a(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def name_prefix(base, host, locked=True):
    """b"." + base + b".blockmm-tmp." + [b"lk."] + host + b".", the base shortened with a hash of the
    whole where the temporary name would pass NAME_MAX (the C++ rule, byte for byte)."""
    fixed = NAME_EXTRA + len(host)
    shown = base
    if fixed + len(base) > NAME_MAX:
        shown = base[:NAME_MAX - fixed - 17] + b"~%016x" % _fnv1a(base)
    return b"." + shown + MARKER + (LOCKED_FLAG if locked else b"") + host + b"."


def _unusable_output(target, st):
    """Why `target` cannot be an output renamed into place (src/io/atomic_output.cpp
    unusable_output): a pipe or socket, or a link into /proc, where /dev/stdout and /dev/fd/N lead
    (renaming over it would replace the system's /dev/stdout, for root, with the output)."""
    if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
        return ("is a pipe or socket; the tools write their output into a file they rename into place (a character "
                "device such as /dev/null is written in place)")
    hop = os.fsencode(target)
    for _ in range(40):
        try:
            if not stat.S_ISLNK(os.lstat(hop).st_mode):
                break
            link = os.readlink(hop)
        except OSError:
            break
        following = link if link.startswith(b"/") else os.path.join(os.path.dirname(hop) or b".", link)
        if os.path.realpath(os.path.dirname(following) or b".").startswith(b"/proc/"):
            return (f"is a link to an open descriptor ({os.fsdecode(link)}), as /dev/stdout is; the tools rename a "
                    f"finished file into place and cannot write into a descriptor: name the file itself")
        hop = following
    return ""


class AtomicOutput:
    """with AtomicOutput(target, tool) as out: write through out.fd (or out.handle()), then
    out.commit(); leaving the block without a commit removes the temporary."""

    def __init__(self, target, tool="blockmm"):
        self.target, self.tool = os.fspath(target), tool
        self.fd = self.dir_fd = -1
        self.identity = None  # (st_dev, st_ino) of the temporary once created
        self.done = False
        self.in_place = False
        if not self.target or self.target.endswith("/"):
            raise UsageError(f"output path '{self.target}' names no file")
        try:
            st = os.stat(self.target)
        except OSError:
            st = None
        if st is not None and stat.S_ISCHR(st.st_mode):
            self.in_place = True
            self.fd = self._open_device()
            return
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{self.target}: is a directory")
        why = _unusable_output(self.target, st)
        if why:
            raise OutputError(f"{self.target}: {why}")
        directory, base = os.path.split(self.target)
        self.directory = directory or "."
        self.base = os.fsencode(base)
        try:
            self.dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise OutputError(f"{self.target}: cannot create a temporary file in {self.directory}: "
                              f"{error.strerror}") from None
        try:
            if self._read_only():
                raise OutputError(f"{self.target}: the existing output is read-only; {tool} does not replace it (make "
                                  f"it writable or remove it first)")
            host = _host_tag()
            prefix = name_prefix(self.base, host)
            self._remove_stale(prefix[:-len(host) - 1], host)  # any host's: "." <name> ".blockmm-tmp.lk."
            pid = str(os.getpid()).encode() + b"."
            self._create(prefix + pid, name_prefix(self.base, host, locked=False) + pid)
        except BaseException:
            self.abandon()
            raise

    def _open_device(self):
        try:
            return os.open(self.target, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as error:
            raise OutputError(f"{self.target}: cannot open: {error.strerror}") from None

    def _read_only(self):
        try:
            st = os.stat(self.base, dir_fd=self.dir_fd)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        return (st.st_mode & 0o222) == 0 or not os.access(self.base, os.W_OK, dir_fd=self.dir_fd,
                                                          effective_ids=os.access in os.supports_effective_ids)

    def _remove_stale(self, prefix, host):
        """Temporaries of this target left by runs that are provably gone (the module's rules):
        `prefix` is the marked one, so unmarked names are never considered."""
        try:
            names = os.listdir(self.dir_fd)
        except OSError:
            return  # the creation reports an unusable folder
        shares_locks = None
        for name in map(os.fsencode, names):
            if not name.startswith(prefix):
                continue
            made_by, dot, rest = name[len(prefix):].rpartition(b".")
            tag, dot_host, pid = made_by.rpartition(b".")
            if not dot or not dot_host or len(rest) != RANDOM_CHARS or not rest.isalnum():
                continue
            if not pid.isdigit() or len(pid) > PID_DIGITS or int(pid) <= 0 or not _is_host_tag(tag):
                continue
            if tag == host and _process_here(int(pid)):
                continue  # perhaps the run itself: kept, whatever its lock says (a second guard)
            if shares_locks is None:
                shares_locks = _shares_locks(self.dir_fd)
            if not shares_locks:
                return
            if self._remove_if_dead(name):
                shown = os.path.join(self.directory, os.fsdecode(name))
                say(f"{self.tool}: note: removed {shown}, the temporary output of a run (process {int(pid)}) that no "
                    f"longer exists")

    def _remove_if_dead(self, name):
        try:
            named = os.stat(name, dir_fd=self.dir_fd, follow_symlinks=False)
            if (not stat.S_ISREG(named.st_mode) or named.st_uid != os.geteuid()
                    or time.time() - named.st_mtime < STALE_TEMPORARY_SECONDS):
                return False
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                         dir_fd=self.dir_fd)
        except OSError:
            return False
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):
                return False
            _liveness_lock(fd, fcntl.F_RDLCK)  # held by its creator, or no locks here: OSError, kept
            os.unlink(name, dir_fd=self.dir_fd)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    def _create(self, locked_prefix, plain_prefix):
        """The temporary under `locked_prefix` holding its liveness lock, which keeps other runs'
        sweeps off it while this lives; where the lock cannot be taken (no locks here, or ENOLCK
        for now), under `plain_prefix`, which no sweep removes (src/io/atomic_output.cpp
        create_temporary)."""
        # No signal between the creation and the registration, nor before the file's identity is
        # known (the handler's abandon() compares it): a temporary is always removable.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, CLEANUP_SIGNALS)
        try:
            self._open_new(locked_prefix)
            try:
                _liveness_lock(self.fd, fcntl.F_WRLCK)
            except OSError:
                os.unlink(self.name, dir_fd=self.dir_fd)
                os.close(self.fd)
                self.fd = -1
                self._open_new(plain_prefix)
            made = os.fstat(self.fd)
            self.created_mode = made.st_mode & 0o7777
            self.identity = (made.st_dev, made.st_ino)
            _temporaries[id(self)] = self
        except OSError as error:
            raise OutputError(f"{self.target}: cannot create a temporary file in {self.directory}: "
                              f"{error.strerror}") from None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        try:
            os.fchmod(self.fd, 0o600)  # private while partial; the final mode is set at the commit
        except OSError as error:
            raise OutputError(f"{self.target}: cannot prepare the temporary file {self.temporary}: "
                              f"{error.strerror}") from None

    def _open_new(self, prefix):
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for attempt in range(101):
            self.name = prefix + "".join(secrets.choice(ALPHABET) for _ in range(RANDOM_CHARS)).encode()
            try:
                self.fd = os.open(self.name, flags, 0o666, dir_fd=self.dir_fd)
                return
            except FileExistsError:
                if attempt == 100:
                    raise

    @property
    def temporary(self):
        return os.path.join(self.directory, os.fsdecode(self.name))

    def handle(self):
        """A buffered binary file object on the descriptor (closing it leaves the descriptor open)."""
        return os.fdopen(self.fd, "wb" if self.in_place else "r+b", closefd=False)

    def _ours(self):
        try:
            named = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISREG(named.st_mode) and (named.st_dev, named.st_ino) == self.identity

    def commit(self):
        if self.in_place:
            self._close()
            return
        try:
            os.fsync(self.fd)
        except OSError as error:
            raise OutputError(f"{self.target}: cannot write: {error.strerror}") from None
        if not self._ours():
            raise OutputError(f"{self.target}: the temporary file {self.temporary} was replaced or removed by someone "
                              f"else while {self.tool} ran; the output was not written")
        try:
            old = os.stat(self.base, dir_fd=self.dir_fd)
            mode = old.st_mode & 0o7777 if stat.S_ISREG(old.st_mode) else self.created_mode
        except OSError:
            mode = self.created_mode
        try:
            os.fchmod(self.fd, mode)
            os.rename(self.name, self.base, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except OSError as error:
            raise OutputError(f"{self.target}: cannot rename the temporary file {self.temporary} into place: "
                              f"{error.strerror}") from None
        _temporaries.pop(id(self), None)
        try:
            os.fsync(self.dir_fd)  # the rename itself must survive a crash
        except OSError:
            pass
        self._close()

    def abandon(self):
        """Removes the temporary if it is still the file this run created (never someone's link)."""
        if self.done:
            return
        _temporaries.pop(id(self), None)
        if not self.in_place and self.fd >= 0 and self._ours():
            try:
                os.unlink(self.name, dir_fd=self.dir_fd)
            except OSError:
                pass
        self._close()

    def _close(self):
        self.done = True
        for attribute in ("fd", "dir_fd"):
            fd = getattr(self, attribute)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
                setattr(self, attribute, -1)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        self.abandon()
        return False


def write_atomically(target, write, tool=None):
    """Runs write(output) for a new AtomicOutput of `target` and commits it; OS failures of the
    writing become OutputError naming the target, and the temporary goes."""
    tool = tool or "blockmm"
    with AtomicOutput(target, tool) as output:
        try:
            write(output)
        except OSError as error:
            raise OutputError(f"{target}: cannot write: {error.strerror or error}") from None
        output.commit()
