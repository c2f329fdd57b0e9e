"""SVMlight loading speed: ``python -m benchmarks.svmlight``.

Builds MSLR-like files (rows resampled from the MSLR 5k extract, 136 features, qid groups
of ~120) of 5k, 50k and 200k rows in a temporary directory, and times
``load_svmlight`` (median of 3). Reports rows/s, MB/s and the time that rate implies for
MSLR-WEB10K Fold1 train (723,412 rows).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from ltr_toolkit.data.svmlight import load_svmlight

from ._report import SHARED, write_table

MSLR_FOLD1_TRAIN_ROWS = 723_412


def main():
    src = (SHARED / "data" / "mslr-5k" / "msn1.fold1.train.5k.txt").read_text().splitlines()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (5_000, 50_000, 200_000):
            path = Path(tmp) / f"rows{n}.txt"
            with open(path, "w") as fh:
                for i in range(n):
                    line = src[i % len(src)]
                    label, _, rest = line.partition(" ")
                    rest = rest.split(" ", 1)[1]
                    fh.write(f"{label} qid:{i // 120} {rest}\n")
            mb = path.stat().st_size / 1e6
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                ds = load_svmlight(path)
                times.append(time.perf_counter() - t0)
            t = statistics.median(times)
            assert ds.n_docs == n
            rows.append([n, round(mb, 1), t, n / t, mb / t, MSLR_FOLD1_TRAIN_ROWS / (n / t)])
            print(f"{n} rows ({mb:.0f} MB): {t:.2f}s = {n / t:,.0f} rows/s", flush=True)
    write_table("svmlight", ["rows", "MB", "load s (median)", "rows/s", "MB/s",
                             "implied s for MSLR Fold1 train"], rows,
                ["136 dense features per row, as in MSLR; one core"])
    print((Path(__file__).parent / "results" / "svmlight.md").read_text())


if __name__ == "__main__":
    main()
