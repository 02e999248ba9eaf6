"""bench/run's results as typed records: ResultRow (results.csv, one per case x backend x ranks),
RunRow (runs.csv, one per run), and their CSV form.

Each field declares its type and the precision it is stored with. A value is rounded to that
precision when it is set (a float given to an int or text field is an error), so the rows a run
holds are equal to the rows read back from its CSV, and a report drawn from either is the same
text. Nothing is formatted and parsed back in between: the CSV and the report format a field
with `text()`."""
import csv
import dataclasses
import os
import statistics
from typing import Optional


PHASES = ["read", "exchange", "build", "setup", "symbolic", "numeric", "numeric_compute", "write", "commit", "total"]
# These add up to "total" (numeric_compute and write are parts of numeric).
STACKED = ["read", "exchange", "build", "setup", "symbolic", "numeric", "commit"]


class RecordError(ValueError):
    """A CSV cell that does not parse as its column's type."""


# Field kinds: ("str",), ("int",), ("fixed", digits) "%.Nf", ("sig", digits) "%.Ng".
def _text(default=""):
    return dataclasses.field(default=default, metadata={"kind": ("str",)})


def _int():
    return dataclasses.field(default=None, metadata={"kind": ("int",)})


def _fixed(digits):
    return dataclasses.field(default=None, metadata={"kind": ("fixed", digits)})


def _sig(digits):
    return dataclasses.field(default=None, metadata={"kind": ("sig", digits)})


def _format(kind, value):
    if value is None:
        return ""
    if kind[0] == "fixed":
        return "%.*f" % (kind[1], value)
    if kind[0] == "sig":
        return "%.*g" % (kind[1], value)
    return str(value)


def _store(kind, name, value):
    """The value as the record keeps it: None, a str, an int, or a float rounded to its digits."""
    if value is None:
        return "" if kind[0] == "str" else None
    if kind[0] == "str":
        if not isinstance(value, str):
            raise TypeError("%s is text, not %r" % (name, value))
        return value
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
        raise TypeError("%s is a number, not %r" % (name, value))
    if kind[0] == "int":
        if isinstance(value, float) and not value.is_integer():
            raise TypeError("%s is an integer, not %r" % (name, value))
        return int(value)
    return float(_format(kind, float(value)))


def _parse(kind, name, text):
    if kind[0] == "str":
        return text
    if text == "":
        return None
    try:
        return int(text) if kind[0] == "int" else float(text)
    except ValueError:
        raise RecordError("column %s: %r is not %s" % (name, text, "an integer" if kind[0] == "int" else "a number"))


class Record:
    """Base of the typed rows: every assignment goes through _store."""

    def __setattr__(self, name, value):
        kind = _kinds(type(self)).get(name)
        if kind is None:
            raise AttributeError("%s has no field %s" % (type(self).__name__, name))
        object.__setattr__(self, name, _store(kind, name, value))

    def text(self, name):
        """The field as the CSV and the report write it."""
        return _format(_kinds(type(self))[name], getattr(self, name))

    @classmethod
    def columns(cls):
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_csv(cls, cells):
        """A row of a csv.DictReader; columns this version lacks are ignored, missing ones empty."""
        kinds = _kinds(cls)
        return cls(**{name: _parse(kind, name, cells.get(name) or "") for name, kind in kinds.items()})


_KINDS = {}


def _kinds(cls):
    if cls not in _KINDS:
        _KINDS[cls] = {f.name: f.metadata["kind"] for f in dataclasses.fields(cls)}
    return _KINDS[cls]


@dataclasses.dataclass(eq=True)
class ResultRow(Record):
    """One case x backend x ranks: medians of its runs, the case's I/O floor and anchors."""
    case: str = _text()
    n: Optional[int] = _int()
    m: Optional[int] = _int()
    k_a: Optional[int] = _int()
    k_b: Optional[int] = _int()
    density: Optional[float] = _sig(4)
    backend: str = _text()
    ranks: Optional[int] = _int()
    threads_per_rank: Optional[int] = _int()
    device: str = _text()
    status: str = _text()  # ok, MISMATCH, failed (...), skipped: why
    repeats: Optional[int] = _int()
    identical: str = _text()  # ref, yes, NO, unchecked
    read_s: Optional[float] = _fixed(4)
    exchange_s: Optional[float] = _fixed(4)
    build_s: Optional[float] = _fixed(4)
    setup_s: Optional[float] = _fixed(4)
    symbolic_s: Optional[float] = _fixed(4)
    numeric_s: Optional[float] = _fixed(4)
    numeric_compute_s: Optional[float] = _fixed(4)
    write_s: Optional[float] = _fixed(4)
    commit_s: Optional[float] = _fixed(4)
    total_s: Optional[float] = _fixed(4)
    wall_s: Optional[float] = _fixed(4)
    wall_min_s: Optional[float] = _fixed(4)
    wall_max_s: Optional[float] = _fixed(4)
    launch_s: Optional[float] = _fixed(4)
    rss_mb: Optional[float] = _fixed(1)
    imbalance: Optional[float] = _fixed(3)
    block_products: Optional[int] = _int()
    useful_macs: Optional[int] = _int()
    c_blocks: Optional[int] = _int()
    output_bytes: Optional[int] = _int()
    gmacs_numeric: Optional[float] = _sig(4)
    gmacs_compute: Optional[float] = _sig(4)
    gmacs_e2e: Optional[float] = _sig(4)
    # The cuda backend's cost model: each numeric path's predicted time (kernels/cuda/path_choice.hpp),
    # beside the measured numeric_s and numeric_compute_s of the path that ran (device names it).
    predicted_sparse_s: Optional[float] = _fixed(4)
    predicted_dense_s: Optional[float] = _fixed(4)
    floor_read_s: Optional[float] = _fixed(4)
    floor_write_s: Optional[float] = _fixed(4)
    floor_s: Optional[float] = _fixed(4)
    wall_over_floor: Optional[float] = _fixed(3)
    total_over_floor: Optional[float] = _fixed(3)
    floor_one_file_s: Optional[float] = _fixed(4)  # the output's bytes into one file (floor.py)
    floor_files_s: Optional[float] = _fixed(4)     # the same as separate files
    write_over_one_file: Optional[float] = _fixed(3)  # write phase's rate / the one-file floor's
    write_over_files: Optional[float] = _fixed(3)     # write phase's rate / the separate files' floor's
    scipy_s: Optional[float] = _fixed(4)
    scipy_multiply_s: Optional[float] = _fixed(4)
    scipy_wall_s: Optional[float] = _fixed(4)
    scipy_check: str = _text()  # identical, equal matrices (bytes differ), DIFFERENT, or why not run
    cusparse_status: str = _text()
    cusparse_spgemm_s: Optional[float] = _fixed(5)
    cusparse_wall_s: Optional[float] = _fixed(3)
    dbcsr_multiply_s: Optional[float] = _fixed(4)
    dbcsr_wall_s: Optional[float] = _fixed(3)
    dbcsr_check: str = _text()  # equal, DIFFERENT, or why not run
    machine: str = _text()
    commit: str = _text()
    date: str = _text()

    @property
    def measured(self):
        return self.wall_s is not None

    def phase(self, p):
        return getattr(self, p + "_s")


@dataclasses.dataclass(eq=True)
class RunRow(Record):
    """One blockmm run: exit code, identity, wall time, peak RSS, blockmm's phases and work."""
    case: str = _text()
    backend: str = _text()
    ranks: Optional[int] = _int()
    repeat: Optional[int] = _int()
    rc: Optional[int] = _int()
    identical: str = _text()
    wall_s: Optional[float] = _fixed(4)
    rss_mb: Optional[float] = _fixed(1)
    read_s: Optional[float] = _fixed(4)
    exchange_s: Optional[float] = _fixed(4)
    build_s: Optional[float] = _fixed(4)
    setup_s: Optional[float] = _fixed(4)
    symbolic_s: Optional[float] = _fixed(4)
    numeric_s: Optional[float] = _fixed(4)
    numeric_compute_s: Optional[float] = _fixed(4)
    write_s: Optional[float] = _fixed(4)
    commit_s: Optional[float] = _fixed(4)
    total_s: Optional[float] = _fixed(4)
    useful_macs: Optional[int] = _int()
    output_bytes: Optional[int] = _int()


COLUMNS = ResultRow.columns()
RUN_COLUMNS = RunRow.columns()


def read_rows(path, cls):
    """The records of a CSV written by write_rows (none when it does not exist). A cell that does
    not parse raises RecordError naming the file, line and column."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, newline="") as f:
        for line, cells in enumerate(csv.DictReader(f), start=2):
            try:
                rows.append(cls.from_csv(cells))
            except RecordError as e:
                raise RecordError("%s line %d: %s" % (path, line, e))
    return rows


def write_rows(path, rows, cls):
    tmp = path + ".tmp"
    names = cls.columns()
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\r\n")  # csv.DictWriter's default, as before
        w.writerow(names)
        for r in rows:
            w.writerow([r.text(c) for c in names])
    os.replace(tmp, path)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=3):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        return "%.*f" % (digits, v)
    return str(v)


def label(row):
    return "%s x%d" % (row.backend, row.ranks)


def case_order(rows):
    order = []
    for r in rows:
        if r.case not in order:
            order.append(r.case)
    return order
