"""The versions users run (issue 50), offline: each supported version's distribution, its
plugin zip chosen by the descriptor, and one line for what is missing or unsupported."""

from __future__ import annotations

import zipfile

import pytest

from ltr_toolkit import versions
from ltr_toolkit.errors import ProvisionError, UserError
from ltr_toolkit.localnode import plugins
from ltr_toolkit.localnode.distributions import ELASTICSEARCH_DIST, OPENSEARCH_DIST, distribution


def _zip(path, descriptor: str):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("plugin.jar", b"x")
        zf.writestr("plugin-descriptor.properties", descriptor)
    return path


@pytest.mark.parametrize("engine", ["opensearch", "elasticsearch"])
def test_every_supported_version_has_its_distribution(engine):
    base = distribution(engine)
    assert distribution(engine, base.version) is base                 # the pinned default
    for version, spec in versions.SUPPORTED[engine].items():
        d = distribution(engine, version)
        assert d.version == version and d.artifact[2] == version and d.home_name.endswith(version)
        assert d.plugin_version == spec["plugin"] and d.java == spec["java"]
        if engine == "opensearch":     # the k-NN plugin where Maven Central serves one
            knn = [a for n, a in d.extra_plugins if n == "opensearch-knn"]
            assert knn == ([] if spec["knn"] is None else [(*knn[0][:2], spec["knn"], "zip")])
            assert d.plugin_artifact[2] == spec["plugin"]
    assert distribution("opensearch", "3.8.0").extra_plugins == ()     # not on Maven Central


def test_an_unsupported_version_is_one_line_naming_the_supported():
    with pytest.raises(UserError) as ei:
        distribution("elasticsearch", "8.16.0")
    assert "8.16.0 is not a supported version" in str(ei.value)
    assert all(v in ei.value.hint for v in versions.SUPPORTED["elasticsearch"])


def test_the_zip_is_the_one_built_for_the_version(monkeypatch, tmp_path):
    for var in ("LTR_PLUGIN_ZIP", "LTR_ES_PLUGIN_ZIP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LTR_HOME", str(tmp_path))
    folder = tmp_path / "plugins"
    folder.mkdir()
    z36 = _zip(folder / "a.zip", "name=opensearch-ltr\nopensearch.version=3.6.0\n")
    z38 = _zip(folder / "b.zip", "name=opensearch-ltr\nopensearch.version=3.8.0\n")
    es9 = _zip(folder / "c.zip", "name=ltr\nelasticsearch.version=9.0.8\n")
    assert plugins.supplied_plugin_zip(OPENSEARCH_DIST) == z36
    assert plugins.supplied_plugin_zip(distribution("opensearch", "3.8.0")) == z38
    assert plugins.supplied_plugin_zip(distribution("opensearch", "2.19.6")) is None
    assert plugins.supplied_plugin_zip(distribution("elasticsearch", "9.0.8")) == es9
    assert plugins.supplied_plugin_zip(ELASTICSEARCH_DIST) is None     # built for 9.0.8: never


def test_a_missing_zip_is_named_before_anything_is_downloaded(cli):
    import os
    import shutil
    import tempfile
    from pathlib import Path
    home = Path(tempfile.mkdtemp(prefix="ltr-versions-", dir="/var/tmp"))   # nobody enters it
    os.chmod(home, 0o755)
    r = cli("--engine", "elasticsearch", "cluster", "start", "--version", "9.0.8",
            env={"LTR_HOME": str(home), "LTR_ES_PLUGIN_ZIP": ""})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no LTR plugin zip for Elasticsearch 9.0.8" in lines[0]
    assert "elasticsearch-ltr-1.5.12-es9.0.8.zip" in lines[0]
    assert not (home / "elasticsearch-9.0.8").exists()                # no distribution fetched
    shutil.rmtree(home, ignore_errors=True)


def test_cluster_start_refuses_an_unsupported_version_in_one_line(cli):
    r = cli("cluster", "start", "--version", "3.7.0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "OpenSearch 3.7.0 is not a supported version" in r.stderr and "3.8.0" in r.stderr


def test_a_tree_trained_with_missing_features_is_refused_where_missing_reads_as_zero():
    """A model trained on 3.x data (missing = NaN) uploaded to 2.19.6 (missing read as
    0.0 in trees) would score otherwise than ltr predict: one line naming the version."""
    from ltr_toolkit.stores.model_store import check_missing_rule
    from ltr_toolkit.transport.engine import Engine
    old, new = (Engine("opensearch", v, frozenset(), None) for v in ("2.19.6", "3.8.0"))
    es = Engine("elasticsearch", "9.0.8", frozenset(), None)
    assert (old.missing_rule, new.missing_rule, es.missing_rule) == ("zero", "absent", "absent")
    tree = {"algorithm": "lambdamart", "missing_features": "absent"}
    with pytest.raises(UserError) as ei:
        check_missing_rule(old, tree)
    assert "OpenSearch 2.19.6's LTR plugin reads a missing feature as 0.0" in str(ei.value)
    for engine in (new, es):
        check_missing_rule(engine, tree)                        # served as predicted
    check_missing_rule(old, dict(tree, missing_features="zero"))  # logged on 2.19: 0.0 too
    check_missing_rule(old, {"algorithm": "linear", "missing_features": "absent"})


def test_an_install_killed_part_way_is_removed_not_trusted(tmp_path):
    """A plugin folder without its descriptor (an install killed part-way) made the next
    start fail inside the node; it now counts as not installed and is removed first."""
    from ltr_toolkit.localnode.plugins import DESCRIPTOR, plugin_installed, remove_broken_plugins
    home = tmp_path / "opensearch-3.8.0"
    (home / "plugins" / "opensearch-ltr").mkdir(parents=True)
    (home / "plugins" / "opensearch-knn").mkdir()
    (home / "plugins" / "opensearch-knn" / DESCRIPTOR).write_text("name=opensearch-knn\n")
    assert not plugin_installed(home)
    said = []
    remove_broken_plugins(home, said.append)
    assert sorted(p.name for p in (home / "plugins").iterdir()) == ["opensearch-knn"]
    assert said == ["removing opensearch-ltr: an install that did not finish"]
    (home / "plugins" / "opensearch-ltr").mkdir()
    (home / "plugins" / "opensearch-ltr" / DESCRIPTOR).write_text("name=opensearch-ltr\n")
    assert plugin_installed(home)
