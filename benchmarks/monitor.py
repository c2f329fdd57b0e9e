"""``ltr monitor`` live, on the OpenSearch node: changes made to a live index between two
scheduled runs, each caught and named (issue 51).

Cranfield in ``mon-cranfield`` (the shipped feature set; a LambdaMART model trained on two
thirds of run 1's queries, its gains on the last third recorded as held-out evidence), then, each in its own index cloned by ``_reindex``:

* nothing changed: the judgments re-logged (``ok``; the rows byte-identical);
* ``abstract`` renamed ``summary`` in the mapping, by ``_reindex`` (its features
  ``broken``; the neighbours and vectors, kept out of ``_source``, are lost with it);
* the documents re-indexed with the ``standard`` analyzer instead of ``english`` (``drift`` on the BM25
  features; the model's decay measured: deployed on run 1, judged on run 3);
* the documents copied by ``_reindex`` without their vectors (``broken``: the semantic
  feature; an index made without the vector field is refused by ``ltr log`` itself);
* a catalogue (Cranfield with a numeric ``popularity`` field and a feature on it) whose
  popularity is re-computed x100 (``drift`` or ``degraded``, named).

Each case's exit code and summary go into ``benchmarks/results/monitor.md`` with its PNG.

    python -m benchmarks.monitor
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._live import connect, workdir
from benchmarks._report import RESULTS
from benchmarks.monitor_null import INDEX, ensure_index, featureset, log
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.evidence import from_valid
from ltr_toolkit.pipeline.train import train_model


def clone(conn, src: str, dst: str, edit=lambda props: None, script: str | None = None,
          params: dict | None = None) -> None:
    """``dst``: ``src``'s settings and mapping (``edit`` changes its properties in place),
    its documents copied by ``_reindex`` (``script``: painless run on each)."""
    c = conn.client()
    if c.indices.exists(index=dst):
        c.indices.delete(index=dst)
    settings = c.indices.get_settings(index=src)[src]["settings"]["index"]
    keep = {k: settings[k] for k in ("analysis", "knn", "number_of_shards", "similarity") if k in settings}
    mapping = c.indices.get_mapping(index=src)[src]["mappings"]
    edit(mapping["properties"])
    c.indices.create(index=dst, body={"settings": {"index": dict(keep, number_of_replicas=0)},
                                      "mappings": mapping})
    body = {"source": {"index": src}, "dest": {"index": dst}}
    if script:
        body["script"] = {"source": script, "lang": "painless", "params": params or {}}
    c.reindex(body=body, refresh=True, wait_for_completion=True, request_timeout=600)
    c.indices.forcemerge(index=dst, max_num_segments=1, request_timeout=600)


def renamed(props):
    props["summary"] = props.pop("abstract")


def _fresh(conn, index: str, **options) -> None:
    """Cranfield indexed again into ``index`` with other options (an analyzer, no vectors)."""
    if conn.client().indices.exists(index=index):
        conn.client().indices.delete(index=index)
    ensure_index(conn, index, **options)


def snapshot(folder: Path, name: str, data: Path) -> Path:
    """``data`` as a job's published snapshot ``folder/run-NAME``."""
    d = folder / f"run-{name}"
    d.mkdir(parents=True, exist_ok=True)
    for suffix in ("", ".json"):
        shutil.copy(f"{data}{suffix}", d / f"features.txt{suffix}")
    (d / "manifest.json").write_text(json.dumps({"run_id": name}))
    return d / "features.txt"


def deploy(data: Path, out: Path) -> Path:
    """A LambdaMART trained on the first two thirds of ``data``'s queries, its gains on
    the last third recorded as its held-out evidence (as ``ltr train --valid`` does)."""
    ds = load_logged(data)
    cut = 2 * ds.n_queries // 3
    art = train_model(ds.subset(range(cut)), "lambdamart", source=str(data), seed=0)
    art["held_out"] = from_valid(art, ds.subset(range(cut, ds.n_queries)), 10, early_stopped=False)
    out.write_text(json.dumps(art))
    return out


def check(name: str, args: list, wd: Path) -> dict:
    """``ltr monitor ARGS -o --plot``: exit code, summary, report."""
    png = RESULTS / f"monitor_{name}.png"
    cmd = [sys.executable, "-m", "ltr_toolkit.cli", "monitor", *map(str, args),
           "-o", str(wd / f"{name}.json"), "--plot", str(png)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(f"== {name}: exit {r.returncode}\n{r.stdout}{r.stderr}", flush=True)
    report = json.loads((wd / f"{name}.json").read_text()) if (wd / f"{name}.json").exists() else {}
    return {"name": name, "code": r.returncode, "summary": r.stdout.strip() or r.stderr.strip(),
            "report": report, "png": png.name}


def catalogue(conn, wd: Path) -> list[dict]:
    """Cranfield with a numeric popularity (how often a document is judged relevant, plus
    noise), a feature on it, a model trained on it; then popularity x100."""
    jl = cranfield.judgments()
    rng = np.random.default_rng(0)
    pop: dict = {}
    for (q, d), g in jl.grades.items():
        pop[d] = pop.get(d, 0.0) + float(g > 0)
    values = {d["id"]: round(float(rng.lognormal(1.0, 0.5) + 3 * pop.get(d["id"], 0.0)), 3)
              for d in cranfield.documents()}
    add = lambda props: props.update(popularity={"type": "float"})          # noqa: E731
    clone(conn, INDEX, "mon-catalogue", add, "ctx._source.popularity = params.p[ctx._id]", {"p": values})
    clone(conn, "mon-catalogue", "mon-catalogue-x100", script="ctx._source.popularity *= 100")
    fs = json.loads(Path(cranfield.FEATURE_SET).read_text())
    feats = fs["featureset"]["features"] if "featureset" in fs else fs["features"]
    feats.append({"name": "popularity", "params": [], "template_language": "mustache",
                  "template": {"function_score": {"query": {"match_all": {}}, "boost_mode": "replace",
                               "field_value_factor": {"field": "popularity", "missing": 0}}}})
    (wd / "catalogue-fs.json").write_text(json.dumps(fs))
    name = featureset(conn, wd / "catalogue-fs.json")
    a, b = wd / "catalogue-1.txt", wd / "catalogue-x100.txt"
    log(conn, "mon-catalogue", name, a)
    log(conn, "mon-catalogue-x100", name, b)
    model = deploy(a, wd / "catalogue-model.json")
    return [check("catalogue_x100", [a, b, "--artifact", model], wd)]


def main() -> None:
    t0 = time.time()
    conn = connect("opensearch")
    wd = workdir() / "monitor"
    shutil.rmtree(wd, ignore_errors=True)
    wd.mkdir(parents=True)
    ensure_index(conn)
    fs = featureset(conn)
    runs = wd / "snapshots"
    one = snapshot(runs, "1", log(conn, INDEX, fs, wd / "run1.txt") and wd / "run1.txt")
    two = snapshot(runs, "2", log(conn, INDEX, fs, wd / "run2.txt") and wd / "run2.txt")
    same = one.read_bytes() == two.read_bytes()
    model = deploy(one, wd / "model.json")
    cases = [check("unchanged", [one, two, "--artifact", model], wd)]
    for name, edit, script, fields in (
            ("renamed_field", renamed, "ctx._source.summary = ctx._source.remove('abstract')", ("title", "summary")),
            ("analyzer", {"analyzer": "standard"}, None, ("title", "abstract")),
            # re-indexed by _reindex: the knn_vector field stays mapped, the vectors (kept out
            # of _source) are gone; an index made without the field is refused by logging
            ("vector_dropped", lambda props: None, None, ("title", "abstract"))):
        if isinstance(edit, dict):      # re-indexed from the documents: neighbours and vectors made again
            _fresh(conn, f"mon-{name}", **edit)
        else:                           # _reindex: what _source does not hold is lost too
            clone(conn, INDEX, f"mon-{name}", edit, script)
        data = log(conn, f"mon-{name}", fs, wd / f"{name}.txt", fields=fields) and wd / f"{name}.txt"
        if name == "analyzer":           # deployed on run 1, judged on run 3: the job's folder
            snapshot(runs, "3", data)
            cases.append(check(name, [runs, "--artifact", model], wd))
        else:
            cases.append(check(name, [one, data, "--artifact", model], wd))
    cases += catalogue(conn, wd)
    write(cases, same, time.time() - t0)


def write(cases: list[dict], same: bool, seconds: float) -> None:
    lines = ["# monitor", "", f"`python -m benchmarks.monitor`, {time.strftime('%Y-%m-%d %H:%M')}, "
             f"OpenSearch node, {seconds:.0f} s. Cranfield (225 queries, the first stage's top 100, "
             "the shipped feature set; index `mon-cranfield`), a LambdaMART model trained on run 1. "
             f"Re-logging the unchanged index twice gave byte-identical rows: {same}.", "",
             "| case | exit | verdict | flagged |", "|---|---|---|---|"]
    for c in cases:
        feats = c["report"].get("drift", {}).get("features", [])
        flagged = ", ".join(f"{f['feature']} ({f['flag']})" for f in feats if f["flag"] != "ok") or "-"
        lines.append(f"| {c['name']} | {c['code']} | {c['report'].get('verdict', '?')} | {flagged} |")
    for c in cases:
        lines += ["", f"## {c['name']} (exit {c['code']})", "", "```", c["summary"], "```", "",
                  f"![{c['name']}]({c['png']})"]
    (RESULTS / "monitor.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
