"""One bench/run invocation's shared state: its options, progress lines, blockmm's environment,
mpirun, where timed runs write (--target shm), the deadline, and the mismatches and failures
found so far (they decide the exit status)."""
import atexit
import os
import shutil
import subprocess


class Session:
    def __init__(self, args, progress):
        self.args, self.progress = args, progress
        self.env = dict(os.environ)
        if not args.keep_omp_num_threads:
            self.env.pop("OMP_NUM_THREADS", None)  # blockmm's default: the node's cores over its ranks
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
        self.mismatches, self.failures = [], []
        self.run_rows = []  # RunRow, one per blockmm run
        self.info = {}  # machine.json
        self.scipy_python = self.cusparse = self.dbcsr = None  # the anchors this machine has
        self.numpy_python = None  # a python3 with numpy, for the real shapes' generator
        self.shm_dir = None
        if args.target == "shm":
            self.shm_dir = os.path.join("/dev/shm", "blockmm-bench-%d" % os.getpid())
            os.makedirs(self.shm_dir, exist_ok=True)
            atexit.register(shutil.rmtree, self.shm_dir, True)

    def left(self):
        """Seconds before the deadline (None: no deadline)."""
        if not self.args.deadline:
            return None
        return self.args.deadline - self.progress.elapsed()

    def past_deadline(self):
        left = self.left()
        return left is not None and left <= 0

    def timeout(self, own):
        """A run's timeout: its own, cut to the deadline (plus slack, so a started run can end)."""
        left = self.left()
        return own if left is None else max(10.0, min(own, left + 30.0))

    def mismatch(self, msg):
        self.mismatches.append(msg)
        self.progress.loud(msg)

    def failure(self, msg):
        self.failures.append(msg)
        self.progress.loud(msg)


def same_bytes(x, y):
    return subprocess.run(["cmp", "-s", x, y]).returncode == 0
