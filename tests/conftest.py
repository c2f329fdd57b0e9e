"""Test fixtures. The cluster fixture starts ONE real local OpenSearch node for the
session (provisioned by the project's own code from Maven Central), or uses
``LTR_TEST_URL`` when set; ``es_cluster`` likewise ONE real Elasticsearch node with the
community LTR plugin (``LTR_TEST_ES_URL``), and ``engine_cluster`` runs a test on each
engine in turn (the nodes are shared by every test of the session). Nothing in this
suite mocks the cluster."""

from __future__ import annotations

import os
import shutil
import tempfile
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MSLR = ROOT.parent / "shared" / "data" / "mslr-5k"


@dataclass
class TestCluster:
    url: str
    ltr_version: str | None
    why_no_ltr: str | None
    started: bool
    engine: str = "opensearch"

    def conn(self):
        from ltr_toolkit.transport.client import Connection
        return Connection(url=self.url)


@pytest.fixture(scope="session")
def cluster():
    from ltr_toolkit.transport import client as cl
    from ltr_toolkit.localnode import process
    from ltr_toolkit.errors import ProvisionError

    url = os.environ.get("LTR_TEST_URL")
    started = False
    why = None
    if not url:
        try:
            info, started = process.start(require_plugin=True)
        except ProvisionError as exc:
            # The plugin could not be provisioned: still run every test that needs only
            # OpenSearch against a real node, and skip the plugin tests naming the cause.
            why = f"LTR plugin unavailable: {exc}"
            info, started = process.start(require_plugin=False)
        url = info.url
    conn = cl.Connection(url=url)
    version = cl.ltr_plugin_version(conn)
    if version is None and why is None:
        why = f"the cluster at {conn.display_url} has no LTR plugin"
    yield TestCluster(url=url, ltr_version=version, why_no_ltr=why, started=started)
    if started:
        process.stop()


@pytest.fixture(scope="session")
def ltr_cluster(cluster):
    if cluster.ltr_version is None:
        pytest.skip(cluster.why_no_ltr)
    return cluster


ENGINES = ("opensearch", "elasticsearch")


@pytest.fixture(scope="session")
def es_cluster():
    """A real Elasticsearch node with the community LTR plugin (provisioned by the
    project's code: the test distribution from Maven Central, the plugin zip from
    ``$LTR_HOME/plugins`` or ``LTR_ES_PLUGIN_ZIP``), or ``LTR_TEST_ES_URL``; the tests
    that need it skip, naming the missing zip, when there is none."""
    from ltr_toolkit.transport import client as cl
    from ltr_toolkit.localnode import plugins, process
    from ltr_toolkit.localnode.distributions import ELASTICSEARCH_DIST as dist

    url, started = os.environ.get("LTR_TEST_ES_URL"), False
    if not url:
        if plugins.supplied_plugin_zip(dist) is None:
            pytest.skip(f"no LTR plugin zip for {dist.label} {dist.version}: put {dist.zip_name} in "
                        f"{plugins.plugin_dir()} or set {dist.zip_env}")
        info, started = process.start(require_plugin=True, engine=dist.engine)
        url = info.url
    version = cl.ltr_plugin_version(cl.Connection(url=url))
    if version is None:
        pytest.skip(f"the Elasticsearch node at {url} has no LTR plugin")
    yield TestCluster(url=url, ltr_version=version, why_no_ltr=None, started=started,
                      engine=dist.engine)
    if started:
        process.stop(dist.engine)


@pytest.fixture(scope="session", params=ENGINES)
def engine_cluster(request):
    """Each engine's node with the LTR plugin in turn (tests get [opensearch] and
    [elasticsearch] ids)."""
    return request.getfixturevalue("ltr_cluster" if request.param == "opensearch" else "es_cluster")


@pytest.fixture(scope="session")
def engine_cranfield(engine_cluster, request):
    """The bundled Cranfield collection (with its vectors) in ``engine_cluster``'s node:
    the OpenSearch one is ``cranfield_index``."""
    if engine_cluster.engine == "opensearch":
        return request.getfixturevalue("cranfield_index")
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.datasets import cranfield
    conn = engine_cluster.conn()
    res = index_documents(conn, "cranfield-test", cranfield.documents(), recreate=True)
    request.addfinalizer(lambda: conn.client().indices.delete(index="cranfield-test",
                                                               ignore_unavailable=True))
    return res


@pytest.fixture
def fresh_home():
    # not under pytest's tmp_path: as root the node runs as `nobody`, who must reach it
    path = Path(tempfile.mkdtemp(prefix="ltr-test-home-", dir="/var/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_cli(*args, env=None, timeout=600):
    """Run the `ltr` CLI in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "ltr_toolkit.cli", *args], capture_output=True,
                          text=True, env=full_env, timeout=timeout, cwd=str(ROOT))


def run_cli_here(*args, env=None):
    """Run the `ltr` CLI's entry point in this process (its parsing, checks and one-line
    errors, as :func:`run_cli`, without a Python start-up and imports per call): for
    tests of what the CLI answers, not of the process (exit status from ``main``'s return
    value; stdout and stderr captured; ``env`` set for the call and restored)."""
    import contextlib
    import io
    from unittest import mock
    from ltr_toolkit.cli import main
    stdout, stderr = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(stdout), \
            contextlib.redirect_stderr(stderr):
        code = main(list(args))
    return subprocess.CompletedProcess(["ltr", *args], code, stdout.getvalue(), stderr.getvalue())


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def mslr_paths():
    train, test = MSLR / "msn1.fold1.train.5k.txt", MSLR / "msn1.fold1.test.5k.txt"
    if not train.is_file():
        pytest.skip(f"needs ../shared/data/mslr-5k (the MSLR extract, not bundled): not found at {MSLR}; "
                    "clone the repository beside shared/ to run it")
    return train, test


@pytest.fixture(scope="session")
def shipped_featureset(ltr_cluster):
    """The bundled Cranfield feature set in the default store (created when missing)."""
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.data.featuresets import load_featureset
    from ltr_toolkit.datasets import cranfield
    conn = ltr_cluster.conn()
    st.init_store(conn, None)
    return st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))[0]


@pytest.fixture(scope="session")
def cranfield_index(cluster):
    """The bundled Cranfield collection loaded once into the session's node."""
    from ltr_toolkit.indexing.documents import index_documents
    from ltr_toolkit.datasets import cranfield
    res = index_documents(cluster.conn(), "cranfield-test", cranfield.documents(), recreate=True)
    yield res
    cluster.conn().client().indices.delete(index="cranfield-test", ignore_unavailable=True)


#: tests that drop the shared default store (and with it every feature set and model
#: the session's fixtures put there): run after every other test
DROPS_DEFAULT_STORE = ("test_default_store_lifecycle",)


#: the fixtures that start (or reach) a node: a test that uses one, directly or through
#: another fixture, is a ``cluster`` test; through one of :data:`PLUGIN_FIXTURES`, ``ltr``
NODE_FIXTURES = {"cluster", "ltr_cluster", "es_cluster", "engine_cluster", "engine_cranfield",
                 "cranfield_index", "shipped_featureset"}
PLUGIN_FIXTURES = {"ltr_cluster", "es_cluster", "engine_cluster", "engine_cranfield",
                   "shipped_featureset"}


def pytest_itemcollected(item):
    """Every test that uses a node fixture gets the ``cluster`` marker (and ``ltr`` when
    the fixture needs the plugin), so ``-m "not cluster"`` starts no JVM; the markers are
    applied here, in one place, as each test is collected (before ``-m`` selects)."""
    used = set(getattr(item, "fixturenames", ()))
    if used & NODE_FIXTURES:
        item.add_marker(pytest.mark.cluster)
    if used & PLUGIN_FIXTURES:
        item.add_marker(pytest.mark.ltr)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """Move the tests of :data:`DROPS_DEFAULT_STORE` to the end, after pytest's own
    reordering (which groups the tests of each engine's node and so once ran them before
    tests whose session fixtures had filled the default store)."""
    last = [it for it in items if it.originalname in DROPS_DEFAULT_STORE]
    if last:
        items[:] = [it for it in items if it.originalname not in DROPS_DEFAULT_STORE] + last
