"""Our Elasticsearch ensemble (``ltr export --target elasticsearch``) against eland's
conversion of the same booster. ``python -m benchmarks.eland PYTHON [PYTHON ...]``.

eland cannot join the project's environment: ``eland[xgboost]`` 9.2.0 pins
``xgboost>=0.90,<2`` (the project needs ``xgboost-cpu>=2.1``), and eland alone pins
``pandas<3`` and brings the ``elasticsearch`` client. So each PYTHON is the interpreter of
a throwaway virtual environment holding eland (e.g. ``eland[xgboost]==9.2.0`` with
scikit-learn, which gets xgboost 1.7.6; or ``eland==9.2.0 xgboost-cpu==3.2.0
scikit-learn``), where eland converts the booster JSON saved by the toolkit (xgboost
3.2) through xgboost's scikit-learn wrappers, as its ``MLModel.import_ltr_model`` does.

Per booster (lambdamart and ranknet-tree, 50 trees, trained on the committed Cranfield
log ``tests/data/cranfield-lexical-top100.txt``) and wrapper: the trees node by node
(split features, children, ``default_left``, thresholds, leaves), eland's extra
base-score tree, and both ensembles' scores of the log's 2,500 rows under Elasticsearch's
semantics (``benchmarks/_es_trees.py``). Table in ``benchmarks/results/eland.md``.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.models.native import ensemble
from ltr_toolkit.pipeline.train import train_model

from ._report import write_table
from ._es_trees import es_score, feature_maps

LOG = Path(__file__).resolve().parent.parent / "tests" / "data" / "cranfield-lexical-top100.txt"

#: run by each eland interpreter: booster JSON, feature names, output -> eland's ensembles
ELAND_SIDE = '''
import json, sys, warnings
warnings.simplefilter("ignore")
import xgboost as xgb
from eland.ml.transformers.xgboost import XGBoostRegressorTransformer
from xgboost import XGBRanker, XGBRegressor
booster, names, out_path = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
out = {"xgboost": xgb.__version__}
for kind, cls, kw in (("XGBRegressor", XGBRegressor, {}), ("XGBRanker", XGBRanker, {"objective": "rank:ndcg"})):
    model = cls(**kw)
    model.load_model(booster)
    try:
        out[kind] = XGBoostRegressorTransformer(model, names).transform().to_dict()
    except Exception as exc:
        out[kind] = {"error": f"{type(exc).__name__}: {exc}"}
b = xgb.Booster(); b.load_model(booster)
out["intercept"] = json.loads(b.save_config())["learner"]["learner_model_param"]["base_score"]
json.dump(out, open(out_path, "w"))
'''


def _pairs(a: list[dict], b: list[dict]):
    """The nodes of two trees matched by walking both from the root."""
    by_b = {n["node_index"]: n for n in b}
    stack, out = [(0, 0)], []
    while stack:
        i, j = stack.pop()
        x, y = a[i], by_b[j]
        out.append((x, y))
        if "leaf_value" not in x and "leaf_value" not in y:
            stack += [(x["left_child"], y["left_child"]), (x["right_child"], y["right_child"])]
    return out


def _leaf(node) -> float:
    return float(np.ravel(node["leaf_value"])[0])


def _nodes(ours: dict, theirs: dict) -> dict:
    c = {"split features differ": 0, "default_left differs": 0, "thresholds": 0,
         "thresholds differ": 0, "max threshold diff": 0.0, "max leaf diff": 0.0}
    for a, b in zip(ours["trained_models"], theirs["trained_models"]):
        for x, y in _pairs(a["tree"]["tree_structure"], b["tree"]["tree_structure"]):
            if "leaf_value" in x:
                c["max leaf diff"] = max(c["max leaf diff"], abs(_leaf(x) - _leaf(y)))
                continue
            c["thresholds"] += 1
            c["split features differ"] += x["split_feature"] != y["split_feature"]
            c["default_left differs"] += x["default_left"] != y.get("default_left", False)
            d = abs(x["threshold"] - y["threshold"])
            c["thresholds differ"] += d != 0
            c["max threshold diff"] = max(c["max threshold diff"], d)
    return c


def _as_float32(ens: dict) -> dict:
    """eland's trees with their thresholds (the dump's decimals) rounded to float32."""
    out = copy.deepcopy(ens)
    for t in out["ensemble"]["trained_models"]:
        for n in t["tree"]["tree_structure"]:
            if "threshold" in n:
                n["threshold"] = float(np.float32(n["threshold"]))
    return out


def compare(ours: dict, theirs: dict, maps: list[dict]) -> dict:
    """Node and score differences of eland's ensemble from ours."""
    o, e = ours["ensemble"], theirs["ensemble"]
    extra = e["trained_models"][len(o["trained_models"]):]
    stump = sum(_leaf(t["tree"]["tree_structure"][0]) for t in extra)
    c = _nodes(o, e)
    ours_s = np.array([es_score(ours, m) for m in maps])
    off = np.abs(np.array([es_score(theirs, m) for m in maps]) - ours_s - stump)
    off32 = np.abs(np.array([es_score(_as_float32(theirs), m) for m in maps]) - ours_s - stump)
    return dict(c, trees=f"{len(o['trained_models'])} / {len(e['trained_models'])}",
                **{"extra tree's leaf": stump if extra else "none",
                   "rows off by > 1e-5 (of the stump)": int(np.sum(off > 1e-5)),
                   "max off": float(off.max()),
                   "rows off, eland's thresholds as float32": int(np.sum(off32 > 1e-5))})


def _boosters(tmp: Path) -> dict:
    ds = load_logged(LOG)
    out = {}
    for algo in ("lambdamart", "ranknet-tree"):
        art = train_model(ds, algo, trees=50, source=str(LOG))
        path = tmp / f"{algo}.json"
        path.write_text(json.dumps(art["model"]["booster"]))
        out[algo] = (path, art["feature_names"], art["model"]["booster"])
    return out


def main(pythons: list[str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="eland-"))
    (tmp / "eland_side.py").write_text(ELAND_SIDE)
    boosters = _boosters(tmp)
    rows = []
    for py in pythons:
        for algo, (path, names, saved) in boosters.items():
            out = tmp / f"{algo}.eland.json"
            subprocess.run([py, str(tmp / "eland_side.py"), str(path), ",".join(names), str(out)],
                           check=True)
            got = json.loads(out.read_text())
            ours = ensemble(saved, names)
            maps = feature_maps(LOG, names)
            for kind in ("XGBRegressor", "XGBRanker"):
                r = {"error": got[kind]["error"]} if "error" in got[kind] else compare(ours, got[kind], maps)
                r = {"xgboost (eland's)": got["xgboost"], "its intercept": got["intercept"],
                     "wrapper": kind, "booster": algo, **r}
                rows.append(r)
    header = list(dict.fromkeys(k for r in rows for k in r))
    write_table("eland", header, [[r.get(k, "") for k in header] for r in rows], notes=NOTES)
    print((Path(__file__).resolve().parent / "results" / "eland.md").read_text())


NOTES = [
    "Boosters saved by xgboost 3.2 (the toolkit's training, base_score 0: saved as \"[0E0]\"); "
    "ours = models.native.ensemble of the saved JSON.",
    "trees: ours / eland's; eland adds a one-leaf tree of the scikit-learn wrapper's "
    "base_score (0.5 when unset) for reg: and rank: objectives.",
    "'its intercept': what eland's xgboost reads from the saved model (xgboost 1.7.6 reads "
    "the 3.x \"[0E0]\" as its default 0.5).",
    "Rows: the 2,500 rows of the committed Cranfield log (843 lacking a feature), scored "
    "with Elasticsearch's semantics; 'off' = |eland - ours - eland's extra tree|.",
    "eland's thresholds come from xgboost's text dump (9 significant digits), not the float32 "
    "split values: a feature equal to a split value goes left where xgboost sends it right.",
]


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m benchmarks.eland PYTHON [PYTHON ...] (interpreters "
                 "of virtual environments with eland)")
    main(sys.argv[1:])
