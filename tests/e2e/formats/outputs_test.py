#!/usr/bin/env python3
"""The Python tools' outputs under the faults and races the C++ output is tested against
(tests/e2e/fault, issue 43 items 3 and 7, issue 42 item 2): modes that follow the umask as the C++
tools' do, a temporary swapped for a symlink mid-write, signals while writing, a SIGKILLed
run's leftover removed by the next run (of either tool), full, tiny and read-only file systems, a
file-size limit, character devices written in place, read-only and same-as-input outputs.

usage: outputs_test.py [unittest args]   (BLOCKMM_BUILD_DIR names the build tree)
"""
import contextlib
import fcntl
import os
import resource
import signal
import stat
import struct
import subprocess
import sys
import time
import unittest

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_support import (BUILD, Work, blockmm, died_by, mode_of, read_bytes, start_tool, tool, umask,  # noqa: E402
                          wait_for_entry, write_bytes)

PREVIOUS = b"the previous output\n"
MARKER = ".blockmm-tmp."  # both forms of a temporary's name hold it
LOCKED = MARKER + "lk."  # the form whose creator holds its liveness lock, the only one swept


def write_product(path, n=8192, m=4, blocks=400_000, seed=1):
    """A sorted COL380 product of random uint32 values (incompressible), written with numpy."""
    rng = np.random.default_rng(seed)
    p = n // m
    keys = np.sort(rng.choice(p * p, size=blocks, replace=False))
    records = np.zeros(blocks, dtype=np.dtype([("i", "<i4"), ("j", "<i4"), ("v", "<u4", (m, m))]))
    records["i"], records["j"] = keys // p, keys % p
    records["v"] = rng.integers(1, 2**32 - 1, size=(blocks, m, m), dtype=np.uint32)
    with open(path, "wb") as f:
        f.write(np.array([n, m, blocks], dtype="<i4").tobytes())
        records.tofile(f)


def write_entries_npz(path, n=8192, entries=3_000_000, seed=2):
    rng = np.random.default_rng(seed)
    coo = sp.coo_matrix((rng.integers(1, 9, entries), (rng.integers(0, n, entries), rng.integers(0, n, entries))),
                        shape=(n, n))
    sp.save_npz(path, coo, compressed=False)


def date_back(path, seconds):
    """Dates a file's last change back: the sweep leaves alone what changed in its last 600 s."""
    when = time.time() - seconds
    os.utime(path, (when, when), follow_symlinks=False)


@contextlib.contextmanager
def hold_liveness_lock(path):
    """What a live run holds on its temporary (src/io/stale_temporaries.hpp): an open file
    description lock on byte 2^62, held for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 1 << 62, 1, 0))
        yield
    finally:
        os.close(fd)


def is_root():
    return os.geteuid() == 0


class Modes(Work):
    """0666 & ~umask for a new output, the old mode for a replaced one: what the C++ tools do."""

    def make_all(self, suffix=""):
        """Each Python output kind, and blockmm-convert's, into names ending in `suffix`."""
        tool("blockmm-import", "-m", 2, self.path("M.npz"), self.path(f"A{suffix}.bin"), check=0)
        tool("blockmm-import", "-m", 2, self.path("M.npz"), self.path(f"A{suffix}.h5"), check=0)
        tool("blockmm-export", self.path("A.bin"), self.path(f"A{suffix}.mtx"), check=0)
        tool("blockmm-export", self.path("A.bin"), self.path(f"A{suffix}.npz"), check=0)
        tool("blockmm-spy", self.path("A.bin"), self.path(f"A{suffix}.png"), check=0)
        blockmm.write_bin(self.path(f"W{suffix}.bin"), blockmm.read(self.path("A.bin")))
        tool("blockmm-convert", self.path("A.bin"), self.path(f"C{suffix}.h5"), check=0)
        return [f"A{suffix}.bin", f"A{suffix}.h5", f"A{suffix}.mtx", f"A{suffix}.npz", f"A{suffix}.png",
                f"W{suffix}.bin", f"C{suffix}.h5"]

    def setUp(self):
        super().setUp()
        sp.save_npz(self.path("M.npz"), sp.csr_matrix(np.eye(6, dtype=np.int64) * 3))
        tool("blockmm-import", "-m", 2, self.path("M.npz"), self.path("A.bin"), check=0)

    def test_new_outputs_follow_the_umask(self):
        for mask in (0o022, 0o077, 0o002):
            with self.subTest(umask=oct(mask)), umask(mask):
                for name in self.make_all(f"-{mask:o}"):
                    self.assertEqual(oct(mode_of(self.path(name))), oct(0o666 & ~mask), name)

    def test_a_replaced_output_keeps_its_mode(self):
        names = self.make_all()
        for name in names:
            os.chmod(self.path(name), 0o640)
        with umask(0o077):
            self.make_all()
        for name in names:
            self.assertEqual(oct(mode_of(self.path(name))), oct(0o640), name)


class Races(Work):
    """Whoever can write the output folder swaps the temporary for a symlink while a tool writes:
    the link's target keeps its bytes, OUT stays the previous file, exit 4 (tests/e2e/fault FaultSwap)."""

    def swap_during(self, name, *args):
        out = os.path.join(self.dir, "out")
        os.mkdir(out)
        target, victim = os.path.join(out, name), self.path("victim.txt")
        write_bytes(target, PREVIOUS)
        write_bytes(victim, b"a file the attacker wants overwritten\n")
        process = start_tool(*args, target)
        temporary = wait_for_entry(out, MARKER, process)
        if temporary is None:
            self.fail(f"no temporary appeared: {process.communicate()[1]!r}")
        os.kill(process.pid, signal.SIGSTOP)
        exists = os.path.exists(os.path.join(out, temporary))
        if exists:
            os.symlink(victim, os.path.join(out, "swap"))
            os.rename(os.path.join(out, "swap"), os.path.join(out, temporary))
        os.kill(process.pid, signal.SIGCONT)
        err = process.communicate(timeout=120)[1].decode("utf-8", "surrogateescape")
        self.assertTrue(exists, "the run ended before the swap (make the case bigger)")
        self.assertEqual(process.returncode, 4, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn(target, err)
        self.assertIn("was replaced or removed by someone else", err)
        self.assertTrue(stat.S_ISREG(os.lstat(victim).st_mode))
        self.assertEqual(read_bytes(victim), b"a file the attacker wants overwritten\n", "written through the link")
        self.assertTrue(stat.S_ISREG(os.lstat(target).st_mode), "the link was renamed over OUT")
        self.assertEqual(read_bytes(target), PREVIOUS)
        self.assertEqual(sorted(os.listdir(out)), sorted([name, temporary]))  # the attacker's link, nothing else
        self.assertTrue(os.path.islink(os.path.join(out, temporary)))

    def test_export(self):
        write_product(self.path("C.bin"))
        self.swap_during("C.npz", "blockmm-export", "--compress", self.path("C.bin"))

    def test_import(self):
        write_entries_npz(self.path("M.npz"))
        self.swap_during("A.h5", "blockmm-import", "-m", 4, self.path("M.npz"))

    def test_spy(self):
        write_product(self.path("C.bin"), blocks=100_000)
        self.swap_during("C.png", "blockmm-spy", "--cells", 2048, self.path("C.bin"))


class Signals(Work):
    """SIGTERM, SIGHUP or SIGINT while a tool writes: the temporary goes, OUT stays, and the tool
    dies by the signal; the reader process of an HDF5 input goes with it. SIGKILL cannot be
    caught: the next run on that output, of a Python or a C++ tool, removes the leftover."""

    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)
        write_product(self.path("C.bin"))

    def interrupt(self, number, source, name="C.npz", *args):
        target = os.path.join(self.out, name)
        write_bytes(target, PREVIOUS)
        process = start_tool(*args, source, target) if args else \
            start_tool("blockmm-export", "--compress", source, target)
        temporary = wait_for_entry(self.out, MARKER, process)
        if temporary is None:
            self.fail(f"no temporary appeared: {process.communicate()[1]!r}")
        os.kill(process.pid, number)
        err = process.communicate(timeout=60)[1]
        self.assertTrue(died_by(process, number) or process.returncode == 128 + number, (process.returncode, err))
        self.assertEqual(os.listdir(self.out), [name], "the temporary was left")
        self.assertEqual(read_bytes(target), PREVIOUS)
        return process

    def test_term_hup_int(self):
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            with self.subTest(signal=signal.Signals(number).name):
                self.interrupt(number, self.path("C.bin"))

    def test_an_ignored_hangup_stays_ignored(self):
        """nohup: a tool started with SIGHUP ignored finishes its output through a hangup."""
        target = os.path.join(self.out, "C.npz")
        process = subprocess.Popen([os.path.join(BUILD, "blockmm-export"), "--compress", self.path("C.bin"), target],
                                   stderr=subprocess.PIPE, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
        if wait_for_entry(self.out, MARKER, process) is None:
            self.fail(f"no temporary appeared: {process.communicate()[1]!r}")
        os.kill(process.pid, signal.SIGHUP)
        err = process.communicate(timeout=120)[1]
        self.assertEqual(process.returncode, 0, err)
        self.assertEqual(os.listdir(self.out), ["C.npz"])
        self.assertEqual(sp.load_npz(target).shape, (8192, 8192))

    def test_term_while_an_hdf5_input_is_read(self):
        tool("blockmm-convert", self.path("C.bin"), self.path("C.h5"), check=0)
        process = self.interrupt(signal.SIGTERM, self.path("C.h5"))
        time.sleep(0.2)
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if self.path("C.h5").encode() in f.read().split(b"\0"):
                        left.append(pid)
            except OSError:
                pass
        self.assertEqual(left, [], f"reader processes of {process.args} outlived it")

    def test_sigkill_leftover_is_removed_by_the_next_run(self):
        target = os.path.join(self.out, "C.npz")
        process = start_tool("blockmm-export", "--compress", self.path("C.bin"), target)
        temporary = wait_for_entry(self.out, MARKER, process)
        self.assertIsNotNone(temporary)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        self.assertIn(f"{MARKER}", temporary)
        self.assertIn(f".{process.pid}.", temporary)
        live = temporary.replace(f".{process.pid}.", f".{os.getpid()}.")  # a live process's: kept
        write_bytes(os.path.join(self.out, live), b"partial")
        for name in (temporary, live):  # past the sweep's margin (src/io/stale_temporaries.hpp)
            date_back(os.path.join(self.out, name), 700)
        tool("blockmm-convert", self.path("C.bin"), self.path("small.h5"), check=0)
        run = tool("blockmm-export", self.path("small.h5"), target, in_process=False)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(f"note: removed {os.path.join(self.out, temporary)}", run.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(["C.npz", live]))
        # The C++ tools sweep the Python tools' leftovers too: one naming rule.
        h5_target = os.path.join(self.out, "A.h5")
        write_entries_npz(self.path("M.npz"))
        process = start_tool("blockmm-import", "-m", 4, self.path("M.npz"), h5_target)
        temporary = wait_for_entry(self.out, "A.h5" + MARKER, process)
        self.assertIsNotNone(temporary)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        self.assertTrue(os.path.exists(os.path.join(self.out, temporary)))
        date_back(os.path.join(self.out, temporary), 700)
        run = tool("blockmm-convert", self.path("C.bin"), h5_target, check=0)
        self.assertIn(f"removed {os.path.join(self.out, temporary)}", run.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, temporary)))

    def test_the_sweep_removes_only_what_is_provably_dead(self):
        """Issue 52, item 1: a leftover goes only when its liveness lock is free and it is older than
        the margin, whatever host made it; a held lock keeps it, also one named with this host and
        a process id that is gone here (a run in another PID namespace), or another host's. An
        unmarked name (a blockmm from before the lock, or a run whose lock was refused) stays."""
        from blockmm.atomic_output import _host_tag, folder_shares_locks
        if not folder_shares_locks(self.out):
            self.skipTest(f"{self.out}: a file system not known to show locks to every host: nothing is swept there")
        host = _host_tag().decode()
        gone = subprocess.Popen(["true"])
        gone.wait()
        dead = gone.pid
        names = {"locked_here": f".C.npz{LOCKED}{host}.{dead}.abcdef",
                 "locked_elsewhere": f".C.npz{LOCKED}node1.{dead}.abcdef",
                 "recent_elsewhere": f".C.npz{LOCKED}node2.{dead}.abcdef",
                 "unmarked_elsewhere": f".C.npz{MARKER}node3.{dead}.abcdef",
                 "dead_elsewhere": f".C.npz{LOCKED}node3.{dead}.abcdef",
                 "dead_here": f".C.npz{LOCKED}{host}.{dead}.ghijkl"}
        for key, name in names.items():
            write_bytes(os.path.join(self.out, name), b"partial")
            date_back(os.path.join(self.out, name), 60 if key == "recent_elsewhere" else 700)
        with hold_liveness_lock(os.path.join(self.out, names["locked_here"])), \
                hold_liveness_lock(os.path.join(self.out, names["locked_elsewhere"])):
            run = tool("blockmm-export", self.path("C.bin"), os.path.join(self.out, "C.npz"), "--to", "npz", "-q")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(sorted(os.listdir(self.out)),
                         sorted(["C.npz", names["locked_here"], names["locked_elsewhere"], names["recent_elsewhere"],
                                 names["unmarked_elsewhere"]]))
        for key in ("dead_elsewhere", "dead_here"):
            self.assertIn(f"note: removed {os.path.join(self.out, names[key])}", run.stderr)

    def test_a_run_in_another_pid_namespace_leaves_a_live_output_alone(self):
        """Issue 52, item 1: a tool started in another PID namespace (a container on this host
        sharing the folder) sees no process of the live run's id; the live run's temporary, dated
        back past the margin, is kept by its lock and the live run commits its output."""
        if subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True).returncode != 0:
            self.skipTest("unshare -p -f --mount-proc is not allowed here")
        target = os.path.join(self.out, "C.npz")
        process = start_tool("blockmm-export", "--compress", self.path("C.bin"), target)
        temporary = wait_for_entry(self.out, MARKER, process)
        if temporary is None:
            self.fail(f"no temporary appeared: {process.communicate()[1]!r}")
        date_back(os.path.join(self.out, temporary), 700)
        sp.save_npz(self.path("S.npz"), sp.csr_matrix(np.eye(4, dtype=np.int64)))
        tool("blockmm-import", "-m", 2, self.path("S.npz"), self.path("S.bin"), check=0)
        beside = subprocess.run(["unshare", "-p", "-f", "--mount-proc", os.path.join(BUILD, "blockmm-export"),
                                 self.path("S.bin"), target], capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, BLOCKMM_MPI="0"))
        self.assertEqual(beside.returncode, 0, beside.stderr)
        self.assertNotIn("note: removed", beside.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.out, temporary)), "the live run's temporary was removed")
        err = process.communicate(timeout=300)[1]
        self.assertEqual(process.returncode, 0, err)
        self.assertEqual(sp.load_npz(target).shape, (8192, 8192))

    def test_a_temporary_whose_lock_is_refused_is_not_marked(self):
        """Where the liveness lock cannot be taken (no locks, ENOLCK on NFS), the temporary takes the
        unmarked name, which no sweep removes; while the lock is taken it is marked, and no marked
        file is left without its lock."""
        probe = ("import errno, os, sys\n"
                 "sys.path.insert(0, sys.argv[1])\n"
                 "from blockmm import atomic_output\n"
                 "def refused(fd, kind):\n"
                 "    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))\n"
                 "if sys.argv[3] == 'refused':\n"
                 "    atomic_output._liveness_lock = refused\n"
                 "out = atomic_output.AtomicOutput(sys.argv[2], 'probe')\n"
                 "print(sorted(os.listdir(os.path.dirname(sys.argv[2]))))\n"
                 "print(os.path.basename(out.temporary))\n"
                 "out.abandon()\n")
        target = os.path.join(self.out, "C.npz")
        for how, form in (("taken", ".C.npz" + LOCKED), ("refused", ".C.npz" + MARKER)):
            run = subprocess.run([sys.executable, "-c", probe, os.path.join(BUILD, "python"), target, how],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(run.returncode, 0, run.stderr)
            listing, temporary = run.stdout.splitlines()
            self.assertTrue(temporary.startswith(form), f"{how}: {temporary}")
            self.assertEqual(listing, repr([temporary]), f"{how}: another file was left")
            self.assertEqual(os.listdir(self.out), [])

    def test_a_signal_held_while_the_temporary_is_made_removes_it(self):
        """A signal that arrives while the temporary is created is held until it is registered
        and known; when it is let through, the handler removes the temporary and the tool dies by
        it (it once found the temporary's identity not yet set and ended by an AttributeError)."""
        probe = ("import os, signal, sys\n"
                 "sys.path.insert(0, sys.argv[1])\n"
                 "from blockmm import atomic_output\n"
                 "atomic_output.install_cleanup_handlers()\n"
                 "real = signal.pthread_sigmask\n"
                 "def arriving_while_held(how, mask):\n"
                 "    if how == signal.SIG_SETMASK:\n"
                 "        os.kill(os.getpid(), signal.SIGTERM)  # pending until the mask below\n"
                 "    return real(how, mask)\n"
                 "signal.pthread_sigmask = arriving_while_held\n"
                 "atomic_output.AtomicOutput(sys.argv[2], 'probe')\n"
                 "sys.exit(3)  # not reached: the signal ends the process\n")
        target = os.path.join(self.out, "C.npz")
        write_bytes(target, PREVIOUS)
        run = subprocess.run([sys.executable, "-c", probe, os.path.join(BUILD, "python"), target],
                             capture_output=True, timeout=60)
        self.assertEqual(run.returncode, -signal.SIGTERM, run.stderr)
        self.assertEqual(os.listdir(self.out), ["C.npz"], "the temporary was left")
        self.assertEqual(read_bytes(target), PREVIOUS)


class Faults(Work):
    """Full, tiny and read-only file systems, a file-size limit, devices, refused outputs: exit 4
    with one line naming OUT, nothing left, an existing OUT untouched."""

    def setUp(self):
        super().setUp()
        self.rng = np.random.default_rng(4)
        write_product(self.path("C.bin"), n=1024, m=4, blocks=5000)  # 5000 blocks: 400 KB as .npz

    def devices(self):
        """(null, full): nodes made here when root (no tool may ever replace /dev's), else /dev's."""
        if not is_root():
            return "/dev/null", "/dev/full"
        null, full = self.path("null.png"), self.path("full.png")
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
        return null, full

    def test_devices_are_written_in_place(self):
        null, full = self.devices()
        sp.save_npz(self.path("M.npz"), sp.csr_matrix(np.eye(4, dtype=np.int64)))
        runs = [("blockmm-export", "--to", "npz", self.path("C.bin")), ("blockmm-export", "--to", "mtx", self.path("C.bin")),
                ("blockmm-import", "-m", 2, self.path("M.npz"))]
        if null.endswith(".png"):
            runs.append(("blockmm-spy", self.path("C.bin")))
        for args in runs:
            with self.subTest(args=args):
                tool(*args, null, check=0)
                run = tool(*args, full)
                self.assert_one_error(run, 4, full)
                for node in (null, full):
                    self.assertTrue(stat.S_ISCHR(os.lstat(node).st_mode), f"{node} was replaced")
                self.assertFalse([f for f in os.listdir(os.path.dirname(null)) if MARKER in f or f.endswith(".tmp")])

    def mount_tmpfs(self, options):
        mnt = self.path("mnt")
        os.makedirs(mnt, exist_ok=True)
        if not is_root():
            self.skipTest("mounting a tmpfs needs root")
        run = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", mnt], capture_output=True, text=True)
        if run.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs: {run.stderr.strip()}")
        self.mounted = mnt
        return mnt

    def tearDown(self):
        if getattr(self, "mounted", None):
            subprocess.run(["umount", "-l", self.mounted])
        super().tearDown()

    def test_tiny_file_system(self):
        mnt = self.mount_tmpfs("size=64k,mode=0755")
        write_bytes(os.path.join(mnt, "C.npz"), PREVIOUS)
        write_product(self.path("S.bin"), n=16384, m=4, blocks=20000)  # a PNG of 2048 x 2048 cells: ~0.5 MB
        sp.save_npz(self.path("M.npz"), sp.csr_matrix(self.rng.integers(0, 9, (256, 256))))
        for args, name in [(("blockmm-export", self.path("C.bin")), "C.npz"),
                           (("blockmm-export", self.path("C.bin")), "C.mtx"),
                           (("blockmm-import", "-m", 2, self.path("M.npz")), "A.h5"),
                           (("blockmm-spy", "--cells", 2048, self.path("S.bin")), "C.png")]:
            with self.subTest(name=name):
                run = tool(*args, os.path.join(mnt, name))
                self.assert_one_error(run, 4, os.path.join(mnt, name))
                self.assertEqual(os.listdir(mnt), ["C.npz"])
                self.assertEqual(read_bytes(os.path.join(mnt, "C.npz")), PREVIOUS)

    def test_read_only_file_system(self):
        mnt = self.mount_tmpfs("size=1m")
        write_bytes(os.path.join(mnt, "C.npz"), PREVIOUS)
        if subprocess.run(["mount", "-o", "remount,ro", mnt]).returncode != 0:
            self.skipTest("cannot remount the tmpfs read-only")
        run = tool("blockmm-export", self.path("C.bin"), os.path.join(mnt, "C.npz"))
        self.assert_one_error(run, 4, os.path.join(mnt, "C.npz"))
        self.assertEqual(read_bytes(os.path.join(mnt, "C.npz")), PREVIOUS)
        run = tool("blockmm-export", self.path("C.bin"), os.path.join(mnt, "D.npz"))
        self.assert_one_error(run, 4, os.path.join(mnt, "D.npz"), "Read-only file system")
        self.assertEqual(os.listdir(mnt), ["C.npz"])

    def test_file_size_limit(self):
        def limited():
            resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

        out = os.path.join(self.dir, "out")
        os.mkdir(out)
        for name in ("C.npz", "C.mtx"):
            with self.subTest(name=name):
                run = subprocess.run([os.path.join(BUILD, "blockmm-export"), self.path("C.bin"), os.path.join(out, name)],
                                     capture_output=True, text=True, preexec_fn=limited, timeout=120)
                self.assert_one_error(run, 4, os.path.join(out, name), "File too large")
                self.assertEqual(os.listdir(out), [])

    def test_outputs_that_are_refused(self):
        target = self.path("C.npz")
        write_bytes(target, PREVIOUS)
        os.chmod(target, 0o444)
        run = tool("blockmm-export", self.path("C.bin"), target)
        self.assert_one_error(run, 4, target, "read-only")
        self.assertEqual(read_bytes(target), PREVIOUS)
        os.mkdir(self.path("D.npz"))
        self.assert_one_error(tool("blockmm-export", self.path("C.bin"), self.path("D.npz")), 4, "is a directory")
        sp.save_npz(self.path("M"), sp.csr_matrix(np.eye(4, dtype=np.int64)))
        os.rename(self.path("M.npz"), self.path("M"))
        before = read_bytes(self.path("M"))
        run = tool("blockmm-import", "-m", 2, self.path("M"), self.path("M"))
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("the output is the input", run.stderr)
        self.assertEqual(read_bytes(self.path("M")), before)

    def test_a_part_of_a_parted_input_is_no_output(self):
        """Issue 52, item 3: an output that is a part file of a parted HDF5 input (the name tab
        completion offers, or a link to it) is a usage error, as for the C++ tools (exit 2, one line,
        the part as it was); it used to fail later as an unreadable input (exit 3)."""
        tool("blockmm-gen", self.path("A.bin"), "--n", 64, "--m", 4, "--density", 0.3, "-q", check=0)
        tool("blockmm", "-q", "--parts", 2, self.path("A.bin"), self.path("A.bin"), self.path("P.h5"), check=0)
        parts = sorted(name for name in os.listdir(self.dir) if name.startswith("P.h5.part-"))
        self.assertEqual(len(parts), 2)
        os.symlink(parts[1], self.path("part.link"))
        before = {name: read_bytes(self.path(name)) for name in parts}
        for output in (self.path(parts[0]), self.path("part.link")):
            with self.subTest(output=output):
                run = tool("blockmm-export", "--to", "npz", self.path("P.h5"), output)
                self.assert_one_error(run, 2, f"{output}: the output is the part file", "never writes over its inputs")
        self.assertEqual({name: read_bytes(self.path(name)) for name in parts}, before)


if __name__ == "__main__":
    unittest.main()
