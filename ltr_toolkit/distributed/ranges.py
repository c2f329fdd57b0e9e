"""Training files as partitions of whole queries, read by the Dask workers in parallel.

The client only plans: the files (paths and globs) are cut into byte ranges of about
``PART_BYTES`` (at least two per worker), each cut moved forward to the next line whose
``qid`` differs from the line before it, so no query is split by a cut. Each worker then
parses its ranges with the toolkit's own reader (``load_logged(byte_range=...)``: the
sidecar, missing features as NaN for logged data) and keeps them in its memory; the client
receives a few numbers and the query ids of every part. A query id in two parts (its rows
not contiguous in a file, or in two files) is refused: the distributed path never moves
rows between workers to regroup a query. Queries get global integer ids in part order,
so every worker's rows are sorted by query (xgboost then never re-sorts them).
"""

from __future__ import annotations

import glob as _glob
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.dataset import graded
from ..data.logged import read_sidecar
from ..data.svmlight import load_logged
from ..errors import InputError, UserError
from ..models.trees import MISSING_AS
import hashlib

#: The target size of one partition (bytes of text).
PART_BYTES = 128 << 20


@dataclass(frozen=True)
class Part:
    path: str
    start: int
    end: int

    def name(self) -> str:
        return f"{self.path} (bytes {self.start}-{self.end})"


def expand(specs) -> list[Path]:
    """The files named by ``specs`` (paths, comma-separated lists, globs), in order."""
    if isinstance(specs, (str, Path)):
        specs = [specs]
    files: list[Path] = []
    for spec in specs:
        for item in str(spec).split(","):
            item = item.strip()
            if not item:
                continue
            if _glob.has_magic(item):
                found = sorted(Path(p) for p in _glob.glob(item) if Path(p).is_file()
                               and not p.endswith(".json"))
                if not found:
                    raise UserError(f"{item}: no file matches", "check the pattern")
                files += found
            elif Path(item).is_file():
                files.append(Path(item))
            else:
                raise InputError(item, None, "no such file")
    if not files:
        raise UserError("no training file given")
    return files


def _qid(line: bytes) -> bytes | None:
    words = line.split(b"#", 1)[0].split(None, 2)
    if len(words) >= 2 and words[1].startswith(b"qid:"):
        return words[1]
    return None


def _query_start(fh, pos: int, size: int) -> int:
    """The first line start after ``pos`` where the query id changes (or ``size``)."""
    fh.seek(pos)
    fh.readline()                      # the rest of the line ``pos`` falls in
    before = None
    while True:
        at = fh.tell()
        line = fh.readline()
        if not line:
            return size
        q = _qid(line)
        if q is None:
            continue
        if before is not None and q != before:
            return at
        before = q


def plan(files, n_workers: int, part_bytes: int = PART_BYTES) -> list[Part]:
    """Byte ranges of whole queries covering every file: at least two per worker
    overall, none much larger than ``part_bytes``."""
    sizes = [Path(f).stat().st_size for f in files]
    total = max(1, sum(sizes))
    want = max(2 * n_workers, math.ceil(total / part_bytes))
    parts = []
    for path, size in zip(files, sizes):
        k = max(1, round(want * size / total))
        with open(path, "rb") as fh:
            cuts = [0] + [_query_start(fh, size * i // k, size) for i in range(1, k)] + [size]
        cuts = sorted(set(cuts))
        parts += [Part(str(path), a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    return parts


def _malloc_thresholds() -> None:
    """Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which turns off
    glibc's dynamic mmap/trim thresholds: every chunk's NumPy temporaries of the reader then
    come from fresh pages (measured: a 128 MB range parsed in 62-69 s on a worker, 19 s
    in a plain process). Set the thresholds a plain process reaches after its first large
    free (mmap 16 MiB, trim 32 MiB; ``svmlight._keep_freed_memory``). glibc only."""
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 16 << 20)           # M_MMAP_THRESHOLD
        libc.mallopt(-1, 32 << 20)           # M_TRIM_THRESHOLD
    except (OSError, AttributeError):        # not glibc: nothing to do
        pass


def load_part(part: Part, n_features: int | None) -> dict:
    """(on a worker) The part's rows: X with missing features as the trees see them,
    labels, query offsets, query ids, and the content hash of the parsed rows."""
    _malloc_thresholds()
    try:
        ds = load_logged(part.path, n_features=n_features, byte_range=(part.start, part.end))
    except UserError as exc:      # (InputError does not survive pickling: plain message)
        raise UserError(f"{exc} [{part.name()}; lines counted from its start]") from None
    digest = ds.content_hash()
    X = ds.X
    np.copyto(X, MISSING_AS, where=np.isnan(X))       # in place: the worker owns it
    return {"X": X, "y": ds.y, "offsets": ds.offsets, "qids": ds.qids, "sha256": digest}


def part_info(data: dict) -> dict:
    """(on a worker) What the client needs of a loaded part."""
    y, off = data["y"], data["offsets"]
    varied = int(graded(y, off).sum())
    return {"rows": len(y), "width": data["X"].shape[1], "qids": data["qids"],
            "min_grade": float(y.min()) if len(y) else 0.0,
            "max_grade": float(y.max()) if len(y) else 0.0,
            "varied": varied, "sha256": data["sha256"]}


def column(data: dict, name: str, width: int | None = None):
    """(on a worker) One array of a loaded part; X padded with missing columns to
    ``width`` when the part's highest feature id is lower."""
    a = data[name]
    if name == "X" and width is not None and a.shape[1] < width:
        wide = np.full((a.shape[0], width), MISSING_AS, dtype=np.float32)
        wide[:, :a.shape[1]] = a
        return wide
    return a


def query_ids(data: dict, base: int) -> np.ndarray:
    """(on a worker) The global query number of every row: ``base`` + its local query."""
    return base + np.repeat(np.arange(len(data["offsets"]) - 1), np.diff(data["offsets"]))


def sidecar(files) -> dict:
    """The sidecar of the first file; every other file's must record the same features."""
    first = read_sidecar(files[0])
    for f in files[1:]:
        other = read_sidecar(f)
        for key in ("feature_names", "featureset_sha256", "missing_features"):
            if first.get(key) != other.get(key):
                raise UserError(f"{f} and {files[0]} differ in their sidecars' {key}",
                                "train on files logged with the same feature set")
    return first


@dataclass
class Loaded:
    """Parts loaded on the workers (``futures``, one per part) and what the client knows
    of them (``infos``: rows, query ids, grades, hashes)."""
    parts: list
    futures: list
    infos: list
    width: int

    @property
    def rows(self) -> int:
        return sum(i["rows"] for i in self.infos)

    @property
    def queries(self) -> int:
        return sum(len(i["qids"]) for i in self.infos)

    @property
    def max_grade(self) -> float:
        return max(i["max_grade"] for i in self.infos)

    @property
    def varied(self) -> int:
        return sum(i["varied"] for i in self.infos)

    def sha256(self) -> str:
        """SHA-256 over the parts' content hashes, in part order."""
        return hashlib.sha256("".join(i["sha256"] for i in self.infos).encode()).hexdigest()

    def arrays(self):
        """Dask arrays X, y, qid over the parts, each chunk where its part was loaded."""
        import dask
        import dask.array as da
        X, y, q, base = [], [], [], 0
        for fut, info in zip(self.futures, self.infos):
            n = info["rows"]
            X.append(da.from_delayed(dask.delayed(column)(fut, "X", self.width),
                                     (n, self.width), dtype=np.float32))
            y.append(da.from_delayed(dask.delayed(column)(fut, "y"), (n,), dtype=np.float64))
            q.append(da.from_delayed(dask.delayed(query_ids)(fut, base), (n,), dtype=np.int64))
            base += len(info["qids"])
        return da.concatenate(X), da.concatenate(y), da.concatenate(q)


def load(client, files, n_features: int | None = None) -> Loaded:
    """Plan ``files`` into parts and have the workers load them, round robin."""
    workers = sorted(client.scheduler_info()["workers"])
    parts = plan(files, len(workers))
    futures = [client.submit(load_part, p, n_features, workers=[workers[i % len(workers)]],
                             pure=False) for i, p in enumerate(parts)]
    infos = client.gather(client.map(part_info, futures, pure=False))
    _check_parts(parts, infos)
    width = n_features or max(i["width"] for i in infos)
    return Loaded(parts, futures, infos, width)


def _check_parts(parts, infos) -> None:
    for part, info in zip(parts, infos):
        if info["min_grade"] < 0:
            raise InputError(part.name(), None, f"grade {info['min_grade']:g} is negative: "
                             "grades are gains >= 0 (map negative judgments to 0)")
    names = np.concatenate([np.asarray(i["qids"], dtype=object) for i in infos])
    owner = np.repeat(np.arange(len(infos)), [len(i["qids"]) for i in infos])
    uniq, counts = np.unique(names.astype(str), return_counts=True)
    if np.any(counts > 1):
        q = uniq[np.argmax(counts > 1)]
        where = sorted({parts[o].name() for o in owner[names.astype(str) == q]})
        raise UserError(f"query qid:{q} is in more than one part of the input: "
                        f"{'; '.join(where[:2])}",
                        "keep each query's rows together in one file (sort by qid), or "
                        "train in one process without --dask")
