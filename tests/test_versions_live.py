"""The version matrix (issue 50), opt-in: ``pytest -m versions``. Each supported version
gets its own node (``ltr cluster start --version V`` in a state directory of its own) and
the suite's live parity and logging checks pointed at it (``benchmarks.versions``); a
version whose plugin zip is not in ``$LTR_HOME/plugins`` is skipped, naming the zip."""

from __future__ import annotations

import pytest

from ltr_toolkit import versions
from ltr_toolkit.localnode.distributions import distribution
from ltr_toolkit.localnode.plugins import supplied_plugin_zip

pytestmark = pytest.mark.versions
MATRIX = [(e, v) for e, vs in versions.SUPPORTED.items() for v in vs]


@pytest.mark.parametrize("engine,version", MATRIX, ids=[f"{e}-{v}" for e, v in MATRIX])
def test_each_version_serves_what_ltr_predict_scores(engine, version):
    from benchmarks.versions import check_version
    dist = distribution(engine, version)
    if supplied_plugin_zip(dist) is None:
        pytest.skip(f"no plugin zip for {dist.label} {version}: put {dist.zip_name} in $LTR_HOME/plugins")
    row = check_version(engine, version, demo=False)
    assert "error" not in row, row["error"]
    for check, c in row["checks"].items():
        assert c["passed"] > 0 and c["failed"] == 0, (check, c["failures"])
