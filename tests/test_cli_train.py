"""`ltr train` / `ltr predict` end to end through the CLI."""

from __future__ import annotations

import json

import numpy as np

from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.models.export import plugin_scores
from ltr_toolkit.pipeline.train import load_model


def _train_then_predict(cli, tmp_path, train, test, *train_args, atol=0.0):
    """`ltr train` then `ltr predict` on TEST; the CLI writes the scores the plugin will
    serve, which order every query's documents as the model's own scores do.
    Returns (artifact dict, model, test dataset)."""
    model = tmp_path / "m.json"
    r = cli("train", str(train), *train_args, "-o", str(model))
    assert r.returncode == 0, r.stderr
    art = json.loads(model.read_text())
    scores = tmp_path / "s.txt"
    r = cli("predict", str(model), str(test), "-o", str(scores))
    assert r.returncode == 0, r.stderr
    got = np.loadtxt(scores)
    ds = load_svmlight(test, n_features=136)
    assert got.shape == (ds.n_docs,)
    art, m = load_model(model)
    np.testing.assert_allclose(got, plugin_scores(art, m, ds.X), rtol=1e-6, atol=atol)
    own = m.predict(ds.X)
    for q in range(ds.n_queries):   # a monotone map of the model's scores: same order
        sl = ds.query(q)
        order = np.argsort(own[sl], kind="stable")
        assert np.all(np.diff(got[sl][order]) >= 0)
    return art, m, ds


def test_train_and_predict(tmp_path, cli, mslr_paths):
    train, test = mslr_paths
    art, _, _ = _train_then_predict(cli, tmp_path, train, test, "--algo", "lambdarank-nn",
                                    "--test", str(test), "--epochs", "3", "--hidden", "16")
    assert art["algorithm"] == "lambdarank-nn" and art["n_features"] == 136
    assert set(art["metrics"]) == {"train", "test"}
    assert len(art["training_data"]["sha256"]) == 64
    assert len(art["normalisation"]["mean"]) == 136


def test_bad_training_file_is_one_line_exit_2(tmp_path, cli):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 qid:1 1:0.5\n2 qid:1 1:zz\n")
    out = tmp_path / "m.json"
    r = cli("train", str(bad), "-o", str(out))
    assert r.returncode == 2
    assert "bad.txt:2:" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    r = cli("predict", str(bad), str(bad), "-o", str(tmp_path / "s.txt"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_train_lambdamart_and_predict(tmp_path, cli, mslr_paths):
    train, test = mslr_paths
    art, m, ds = _train_then_predict(cli, tmp_path, train, test, "--algo", "lambdamart",
                                     "--valid", str(test), "--trees", "30", "--depth", "3", atol=1e-7)
    assert art["algorithm"] == "lambdamart" and art["normalisation"] is None
    from ltr_toolkit.models.xgbjson import score_trees
    np.testing.assert_allclose(score_trees(m.trees_json(), ds.X), m.predict(ds.X), rtol=1e-5, atol=1e-6)


def test_train_model_takes_each_familys_early_stopping_by_default():
    """Without a patience, networks stop after 10 epochs without improvement and trees
    do not stop (LambdaMART's default, as xgboost's: benchmarks/early_stopping.py); a given
    patience applies to either."""
    from ltr_toolkit.data.dataset import RankingDataset
    from ltr_toolkit.pipeline.train import train_model
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 5)).astype(np.float32)
    y = rng.integers(0, 3, size=120).astype(float)
    ds = RankingDataset(X=X, y=y, offsets=np.arange(0, 121, 12), qids=[str(q) for q in range(10)])
    params = {algo: train_model(ds, algo, ds, epochs=2, trees=3)["hyper_parameters"]
              for algo in ("lambdamart", "linear")}
    assert params["lambdamart"]["early_stopping_rounds"] is None
    assert params["linear"]["patience"] == 10
    given = train_model(ds, "lambdamart", ds, trees=3, patience=4)["hyper_parameters"]
    assert given["early_stopping_rounds"] == 4


def _logged(path, sha, names, seed):
    rng = np.random.default_rng(seed)
    path.write_text("".join(f"{rng.integers(0, 3)} qid:{q} " + " ".join(
        f"{i + 1}:{rng.random():.4f}" for i in range(len(names))) + f" # d{q}-{j}\n"
        for q in range(8) for j in range(6)))
    path.with_name(path.name + ".json").write_text(json.dumps(
        {"featureset": "fs", "featureset_sha256": sha, "feature_names": names}))
    return path


def test_data_logged_with_other_features_is_refused(tmp_path, cli):
    """Validation, test and prediction files must come from the feature set version the
    training data (the model) was logged with: same count of columns is not enough."""
    names = ["title", "body", "year"]
    train = _logged(tmp_path / "train.txt", "a" * 64, names, 0)
    same = _logged(tmp_path / "same.txt", "a" * 64, names, 1)
    other = _logged(tmp_path / "other.txt", "b" * 64, names, 2)        # edited feature set
    renamed = _logged(tmp_path / "renamed.txt", "a" * 64, ["body", "title", "year"], 3)
    model = tmp_path / "m.json"
    base = ("train", str(train), "--algo", "linear", "--epochs", "2")
    assert cli(*base, "--valid", str(same), "-o", str(model)).returncode == 0
    for bad, why in ((other, "another version of feature set fs"), (renamed, "other features")):
        for flag in ("--valid", "--test"):
            r = cli(*base, flag, str(bad), "-o", str(tmp_path / "x.json"))
            assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert str(bad) in r.stderr and len(r.stderr.strip().splitlines()) == 1
        r = cli("predict", str(model), str(bad), "-o", str(tmp_path / "s.txt"))
        assert r.returncode == 2 and why in r.stderr, r.stderr
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "s.txt").exists()
    assert cli("predict", str(model), str(same), "-o", str(tmp_path / "s.txt")).returncode == 0


def test_tree_progress_without_valid_shows_rounds_not_nan(tmp_path, cli):
    """Without --valid there is no validation NDCG: the progress names the round only
    (it printed `valid ndcg@10=nan`); with --valid it shows the metric."""
    data = tmp_path / "d.txt"
    data.write_text("".join(f"{(d * 7 + q) % 3} qid:{q} 1:{d * 0.1 + q} 2:{(d * 3) % 5} # d{d}\n"
                            for q in range(1, 9) for d in range(12)))
    r = cli("train", str(data), "--algo", "lambdamart", "--trees", "4", "--depth", "2",
            "-o", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    assert "round 4" in r.stderr and "nan" not in r.stderr, r.stderr
    r = cli("train", str(data), "--algo", "lambdamart", "--trees", "4", "--depth", "2",
            "--valid", str(data), "-o", str(tmp_path / "m2.json"))
    assert r.returncode == 0 and "round 4: valid ndcg@10=" in r.stderr, r.stderr
