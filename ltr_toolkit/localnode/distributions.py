"""How each engine's local node is provisioned and run: the one description the local
node code (:mod:`.provision`, :mod:`.process`, :mod:`.cluster`) asks, so that starting an
Elasticsearch node differs from starting an OpenSearch one in data, not in branches.

Both come from Maven Central as their projects' test distributions (a real engine with a
reduced module set), get the LTR plugin from a zip the user supplies (or, for OpenSearch,
Maven Central when it has it), and run as an unprivileged user on 127.0.0.1.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import versions
from ..transport.engine import ELASTICSEARCH, ENGINES, LABELS, OPENSEARCH


@dataclass(frozen=True)
class Distribution:
    engine: str
    label: str
    version: str
    artifact: tuple
    java: tuple[int, int | None]     # the Java feature versions it runs on (min, max)
    java_env: str                    # where its launcher reads the JDK
    opts_env: str                    # where its launcher reads JVM options
    launcher: str                    # bin/<launcher>
    plugin_cli: str                  # bin/<plugin_cli>
    main_class: str                  # what its server process's command line names
    plugin_version: str              # the LTR plugin build for this version
    plugin_artifact: tuple | None    # the LTR plugin on Maven Central, if it is there
    zip_env: str                     # the variable naming a plugin zip
    descriptor_key: str              # the engine's key in plugin-descriptor.properties
    manager_nodes: str               # the setting naming the first cluster managers
    settings: dict = field(default_factory=dict)   # node settings of its own
    extra_plugins: tuple = ()        # (plugin name, Maven artifact) installed beside the LTR plugin

    @property
    def home_name(self) -> str:
        return f"{self.engine}-{self.version}"

    def state_file(self, name: str) -> str:
        """A file or folder of the state directory (``node.json``, ``data``, ...): the
        OpenSearch node keeps the names it always had; Elasticsearch's are prefixed."""
        return name if self.engine == OPENSEARCH else f"{self.engine}-{name}"

    @property
    def zip_name(self) -> str:
        return ("opensearch-ltr-" if self.engine == OPENSEARCH else "elasticsearch-ltr-") + \
            self.plugin_version + ".zip"

    def java_range(self) -> str:
        lo, hi = self.java
        return f">= {lo}" if hi is None else f"{lo}-{hi}"


OPENSEARCH_DIST = Distribution(
    engine=OPENSEARCH, label=LABELS[OPENSEARCH], version=versions.OPENSEARCH_VERSION,
    artifact=versions.OPENSEARCH_ARTIFACT, java=(versions.MIN_JAVA, None),
    java_env="OPENSEARCH_JAVA_HOME", opts_env="OPENSEARCH_JAVA_OPTS", launcher="opensearch",
    plugin_cli="opensearch-plugin", main_class="org.opensearch.bootstrap.OpenSearch",
    plugin_version=versions.LTR_PLUGIN_VERSION, plugin_artifact=versions.LTR_PLUGIN_ARTIFACT,
    zip_env="LTR_PLUGIN_ZIP", descriptor_key="opensearch.version",
    manager_nodes="cluster.initial_cluster_manager_nodes",
    extra_plugins=(("opensearch-knn", versions.KNN_PLUGIN_ARTIFACT),))

ELASTICSEARCH_DIST = Distribution(
    engine=ELASTICSEARCH, label=LABELS[ELASTICSEARCH], version=versions.ELASTICSEARCH_VERSION,
    artifact=versions.ELASTICSEARCH_ARTIFACT, java=(versions.ES_MIN_JAVA, versions.ES_MAX_JAVA),
    java_env="ES_JAVA_HOME", opts_env="ES_JAVA_OPTS", launcher="elasticsearch",
    plugin_cli="elasticsearch-plugin", main_class="org.elasticsearch.bootstrap.Elasticsearch",
    plugin_version=versions.ES_LTR_PLUGIN_VERSION, plugin_artifact=None,
    zip_env="LTR_ES_PLUGIN_ZIP", descriptor_key="elasticsearch.version",
    manager_nodes="cluster.initial_master_nodes",
    settings={"xpack.security.enabled": "false"})

DISTRIBUTIONS = (OPENSEARCH_DIST, ELASTICSEARCH_DIST)

_BY_ENGINE = {d.engine: d for d in DISTRIBUTIONS}


def distribution(engine: str | None, version: str | None = None) -> Distribution:
    """The distribution of ``engine`` (None: OpenSearch) at ``version`` (None: the pinned
    one), from :data:`versions.SUPPORTED`; one line naming the supported versions
    otherwise."""
    from ..errors import UserError
    try:
        base = _BY_ENGINE[(engine or OPENSEARCH).lower()]
    except KeyError:
        raise UserError(f"unknown engine {engine!r}", f"use one of {', '.join(ENGINES)}") from None
    if version is None or version == base.version:
        return base
    known = versions.SUPPORTED[base.engine]
    if version not in known:
        raise UserError(f"{base.label} {version} is not a supported version",
                        f"use one of {', '.join(known)}; the default is {base.version}")
    v = known[version]
    group, artifact, _, kind = base.artifact
    changes = dict(version=version, artifact=(group, artifact, version, kind), java=v["java"],
                   plugin_version=v["plugin"])
    if base.engine == OPENSEARCH:
        changes.update(plugin_artifact=(*base.plugin_artifact[:2], v["plugin"], "zip"),
                       extra_plugins=() if v["knn"] is None else
                       (("opensearch-knn", (*versions.KNN_PLUGIN_ARTIFACT[:2], v["knn"], "zip")),))
    return replace(base, **changes)


def descriptor(path: Path) -> dict[str, str]:
    """A plugin zip's ``plugin-descriptor.properties`` ({} when it has none or is not a zip)."""
    try:
        with zipfile.ZipFile(path) as zf:
            name = next((n for n in zf.namelist()
                         if n.rsplit("/", 1)[-1] == "plugin-descriptor.properties"), None)
            text = zf.read(name).decode("utf-8", "replace") if name else ""
    except (OSError, zipfile.BadZipFile):
        return {}
    pairs = (ln.split("=", 1) for ln in text.splitlines()
             if "=" in ln and not ln.lstrip().startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def zip_engine(path: Path) -> str | None:
    """Which engine a plugin zip is built for: its descriptor's key, else its name."""
    desc = descriptor(path)
    for dist in _BY_ENGINE.values():
        if dist.descriptor_key in desc:
            return dist.engine
    name = path.name.lower()
    if "ltr" not in name:
        return None
    return ELASTICSEARCH if ELASTICSEARCH in name else OPENSEARCH


def zip_version(path: Path, dist: Distribution) -> str | None:
    """The engine version a plugin zip's descriptor names (None without one)."""
    return descriptor(path).get(dist.descriptor_key)
