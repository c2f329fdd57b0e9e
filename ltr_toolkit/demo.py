"""The main job end to end on the embedded default: local node (or LTR_URL), the bundled
Cranfield collection, feature logging, LambdaMART and LambdaRank-NN training, upload, and
a live evaluation of BM25 vs both rerankers on the held-out test queries."""

from __future__ import annotations

from pathlib import Path

from .cluster import client as cl
from .cluster import store as st
from .cluster.featurelog import log_features
from .cluster.indexing import index_documents
from .cluster.models import upload
from .data.judgments import save_ranklib
from .datasets import cranfield
from .evaluation import evaluate_live
from .featuresets import load_featureset
from .training import load_model, train_from_files

FEATURE_SET = Path(__file__).resolve().parent.parent / "feature_sets" / "cranfield.json"
INDEX = "cranfield"


def run_demo(conn, workdir, log=print, seed: int = 42, k: int = 10) -> dict:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    version = cl.check_ltr(conn)
    log(f"LTR plugin {version} at {conn.display_url}")
    st.init_store(conn, None)
    try:
        count = cl.request(conn, "GET", f"/{INDEX}/_count")["count"]
    except Exception:
        count = -1
    if count != 1400:
        res = index_documents(conn, INDEX, cranfield.documents())
        log(f"indexed {res['count']} Cranfield documents ({res['analyzer']} analyzer)")
    fs = load_featureset(FEATURE_SET)
    fs_name, what = st.upload_featureset_versioned(conn, fs)
    log(f"feature set {fs_name}: {what}")
    files = {}
    for split in ("train", "valid", "test"):
        files[split] = workdir / f"judgments-{split}.txt"
        save_ranklib(cranfield.split_judgments(split), files[split])
    logged = {}
    for split in ("train", "valid"):
        logged[split] = workdir / f"features-{split}.txt"
        side = log_features(conn, cranfield.split_judgments(split), fs_name, INDEX, logged[split])
        log(f"logged {side['rows']} {split} rows ({len(side['missing_docs'])} judged docs missing)")
    models = {}
    for algo, base in (("lambdamart", "cranfield-lambdamart"), ("lambdarank-nn", "cranfield-lambdarank-nn")):
        path = workdir / f"{algo}.json"
        kw = dict(trees=300, depth=4, lr=0.05) if algo == "lambdamart" else dict(epochs=100, lr=1e-3, hidden=(32, 8))
        train_from_files(logged["train"], algo=algo, valid=logged["valid"], output=path, k=k,
                         seed=seed, patience=20, **kw)
        art, m = load_model(path)
        res = upload(conn, art, m, base, fs_name, index=INDEX)
        models[algo] = res["name"]
        log(f"trained and uploaded {res['name']} ({res['type']})")
    report, _, _ = evaluate_live(conn, INDEX, cranfield.split_judgments("test"),
                                 list(models.values()), k=k)
    report["models"] = models
    report["workdir"] = str(workdir)
    return report
