"""``ltr train --dask``: the tree rankers trained on a Dask cluster from files the workers
read, written as the same model artifact as ``train.train_from_files`` (``ltr predict``,
``ltr model upload`` take it unchanged). The settings are ``train.make_estimator``'s; the
metrics in the artifact are computed on the workers, over every query of each split.
"""

from __future__ import annotations

import time

from ..errors import UserError
from ..evaluation import decay as D
from ..io.atomic import check_writable, write_json
from ..models.trees import ALGOS as TREE_ALGOS
from .train import (check_algorithm, check_same_features, grade_variation, make_estimator,
                    model_artifact)
from ..distributed import connect, dask_trees, local_workers, ranges, require
from .artifact import load_model
from .evidence import evidence, per_query


def train_from_files_dask(data, address: str, algo="lambdamart", valid=None, test=None,
                          output=None, on_epoch=None, k=10, seed=42, patience=None,
                          log=None, **settings) -> dict:
    """Train ``algo`` (lambdamart, ranknet-tree) on ``data`` (files, comma-separated
    lists or globs; ``valid`` and ``test`` likewise) on the Dask cluster at ``address``
    (``local:N``: a LocalCluster of N workers)."""
    check_algorithm(algo)
    local_workers(address)                       # a malformed local:N, before any work
    if algo not in TREE_ALGOS:
        raise UserError(f"--dask trains the tree rankers only, not {algo}",
                        f"use --algo {' or '.join(sorted(TREE_ALGOS))}, or drop --dask")
    require()
    if output:
        check_writable(output)
    if patience is not None and valid is None:
        raise UserError("--patience needs --valid: early stopping watches the validation NDCG",
                        "add --valid FILE, or drop --patience")
    model = make_estimator(algo, k=k, seed=seed, patience=patience, **settings)
    files = {"train": ranges.expand(data)}
    files.update({name: ranges.expand(spec) for name, spec in (("valid", valid), ("test", test))
                  if spec is not None})
    side = ranges.sidecar(files["train"])
    for name, fs in files.items():
        if name != "train":
            check_same_features(files["train"][0], side, fs[0], ranges.sidecar(fs))
    say = log or (lambda msg: None)
    with connect(address) as client:
        return _train_on(client, model, algo, files, side, on_epoch, say, output)


def _train_on(client, model, algo, files, side, on_epoch, say, output) -> dict:
    t0 = time.perf_counter()
    nf = len(side["feature_names"]) if side.get("feature_names") else None
    loaded = {"train": ranges.load(client, files["train"], nf)}
    nf = loaded["train"].width
    for name in ("valid", "test"):
        if name in files:
            loaded[name] = ranges.load(client, files[name], nf)
    workers = len(client.scheduler_info()["workers"])
    say(f"read {loaded['train'].rows} rows in {len(loaded['train'].parts)} parts on "
        f"{workers} workers ({time.perf_counter() - t0:.1f} s)")
    source = ",".join(str(f) for f in files["train"])
    warnings = grade_variation(loaded["train"].varied, loaded["train"].queries, source)
    t1 = time.perf_counter()
    history = dask_trees.fit(client, model, loaded["train"], loaded.get("valid"))
    rounds = len(model.booster_.get_dump())
    say(f"{rounds} rounds in {time.perf_counter() - t1:.1f} s")
    if on_epoch is not None:      # the rounds' validation NDCG, as xgboost logged them
        values = history.get("valid", {}).get(model.metric_name, [])
        for r in range(rounds):
            on_epoch(r, float(values[r]) if r < len(values) else None)
    max_grade = max(ld.max_grade for ld in loaded.values())
    metrics = {name: dask_trees.evaluate_parts(client, model, ld, model.k, max_grade)
               for name, ld in loaded.items()}
    tr = loaded["train"]
    artifact = model_artifact(
        model, algo, side, nf, metrics, warnings=warnings,
        training_data={"path": source, "sha256": tr.sha256(), "sha256_of": "parts",
                       "rows": tr.rows, "queries": tr.queries,
                       "dask": {"workers": workers, "parts": len(tr.parts)}})
    if "valid" in loaded:   # the gains ltr monitor tests decay against (pipeline.evidence)
        artifact["held_out"] = _held_out(client, artifact, loaded["valid"],
                                         ranges.sidecar(files["valid"]), model.k,
                                         ",".join(str(f) for f in files["valid"]),
                                         model.early_stopping_rounds is not None)
    if output:
        write_json(output, artifact)
    return artifact


def _part_gains(data: dict, art: dict, side: dict, k: int) -> dict | None:
    """(on a worker) :func:`.evidence.per_query` of the artifact's model (as served) on
    one loaded part (its missing values as logged: NaN)."""
    import numpy as np
    from ..data.dataset import RankingDataset
    from ..models.trees import MISSING_AS
    X = np.where(data["X"] == MISSING_AS, np.nan, data["X"])
    ds = RankingDataset(X=X, y=data["y"], offsets=data["offsets"], qids=data["qids"],
                        meta={"sidecar": side})
    art, model = load_model("the artifact", art, scorer=True)
    return per_query(art, model, ds, k)


def _held_out(client, art: dict, valid, side: dict, k: int, source: str,
              early_stopped: bool) -> dict | None:
    """``ltr train --dask --valid``'s evidence, as ``train_from_files`` records it: the
    model's per-query gains on the validation parts, computed on the workers."""
    import functools
    import numpy as np
    # bound into the function, not passed as map's keywords: dask took the artifact (a
    # dict) for a graph of its own, keyed 'art', which a second run on the cluster met
    # while the first's was still there (AssertionError(<TaskState 'art' processing>))
    gains = functools.partial(_part_gains, art=art, side=side, k=k)
    parts = [p for p in client.gather(client.map(gains, valid.futures, pure=False)) if p is not None]
    if not parts:
        return None
    pq = {"qids": [q for p in parts for q in p["qids"]],
          **{key: np.concatenate([p[key] for p in parts]) for key in (D.MODEL, D.FIRST)}}
    return evidence(pq, k, f"validation split {source}", selected_on=early_stopped)
