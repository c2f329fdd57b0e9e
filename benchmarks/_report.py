"""Write a benchmark's table (Markdown + CSV) into benchmarks/results/."""

from __future__ import annotations

import csv
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


def machine() -> str:
    import os
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_table(name: str, header: list[str], rows: list[list], notes: list[str] = ()) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{name}.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    lines = [f"# {name}", "", f"Run {time.strftime('%Y-%m-%d %H:%M:%S')} on {machine()}.", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for r in rows:
        lines.append("| " + " | ".join(_fmt(v) for v in r) + " |")
    lines += [""] + [f"- {n}" for n in notes]
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def finish(fig, name: str) -> None:
    """Save the figure as results/NAME.png and print the table."""
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)
    print((RESULTS / f"{name}.md").read_text())
