"""CACM (SMART format) -> the files the toolkit reads: documents as JSONL for
`ltr index jsonl`, queries as TSV and judgments as TREC qrels for `--format trec`.

    python docs/cacm/prepare.py ../shared/data/cacm OUT_DIR

CACM's qrels lines are `query doc 0 0`: every listed pair is relevant (grade 1). Queries
without judgments are left out of the qrels (they stay in the queries file). Documents
without an abstract (many of CACM's) get an empty abstract field. One record's id
is broken over two lines in the distributed file (`.I 28` then `56`): it is record 2856.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from ltr_toolkit.data.smart import records

FIELDS = {"T": "title", "W": "abstract", "A": "authors"}


def main(src: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "docs.jsonl", "w") as fh:
        text = (src / "cacm.all").read_text(errors="replace")
        # one record's id is broken over two lines (".I 28" then "56"): record 2856
        text = re.sub(r"^\.I (\d+)\r?\n(\d+)\r?$", r".I \1\2", text, flags=re.M)
        for doc_id, f in records(text):
            fh.write(json.dumps({"id": doc_id, **{name: f.get(k, "") for k, name in FIELDS.items()}}) + "\n")
    queries = {q: f.get("W", "") for q, f in records((src / "query.text").read_text(errors="replace"))}
    with open(out / "queries.tsv", "w") as fh:
        for q, text in queries.items():
            fh.write(f"{q}\t{text}\n")
    with open(out / "qrels.txt", "w") as fh:
        for line in (src / "qrels.text").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                fh.write(f"{int(parts[0])} 0 {int(parts[1])} 1\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
