"""A provisioned node: the pinned distribution of an engine unpacked in the state
directory, with the LTR plugin and (OpenSearch) the k-NN plugin installed."""

from __future__ import annotations

import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProvisionError
from .distributions import OPENSEARCH_DIST, Distribution
from .java import Java, find_java
from .maven import resolve_artifact
from .plugins import DESCRIPTOR, plugin_command, plugin_installed, plugin_zip, remove_broken_plugins
from .state import check_reachable, chown_tree, state_dir


@dataclass
class Install:
    home: Path
    java: Java
    plugin: bool
    downloaded: bool
    dist: Distribution = OPENSEARCH_DIST


def provision(require_plugin: bool = True, log=lambda msg: None, knn: bool = True,
              dist: Distribution = OPENSEARCH_DIST) -> Install:
    """Unpack the pinned distribution of ``dist``'s engine and install the LTR plugin and
    (``knn``) its extra plugins (OpenSearch's k-NN); reuse what is there. ``knn`` False
    removes an installed extra plugin (a node for the lexical features alone)."""
    java = find_java(dist)
    root = state_dir()
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        check_reachable(root)
    home = root / dist.home_name
    remove_broken_plugins(home, log)
    zip_path = None
    ready = (home / ".ltr-toolkit-ready").is_file()
    if not (ready and plugin_installed(home)):   # the zip first: named before a download
        try:
            zip_path = plugin_zip(log, dist)
        except ProvisionError:
            if require_plugin:
                raise
    downloaded = False
    if not ready:
        downloaded = _unpack(dist, root, home, log)
    plugin = plugin_installed(home)
    if not plugin:
        if zip_path is not None:
            log(f"installing LTR plugin from {zip_path}")
            plugin_command(home, java, log, dist, "install", zip_path.resolve().as_uri(), "the LTR plugin")
            plugin = True
    for name, artifact in dist.extra_plugins:
        there = (home / "plugins" / name / DESCRIPTOR).is_file()
        if plugin and knn and not there:
            zip_path, _ = resolve_artifact(artifact, log)
            log(f"installing {name} from {zip_path.name}")
            plugin_command(home, java, log, dist, "install", zip_path.resolve().as_uri(), name)
        elif not knn and there:
            log(f"removing {name}")
            plugin_command(home, java, log, dist, "remove", name, name)
    chown_tree(home)
    return Install(home, java, plugin, downloaded, dist)


def _unpack(dist: Distribution, root: Path, home: Path, log) -> bool:
    """The distribution's zip (from Maven) unpacked as ``home``; whether it was downloaded."""
    zipped, downloaded = resolve_artifact(dist.artifact, log)
    log(f"unpacking {zipped.name}")
    tmp = root / f".unpack-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(zipped) as zf:
        zf.extractall(tmp)
    inner = next(tmp.iterdir())
    for script in (inner / "bin").iterdir():
        script.chmod(0o755)
    shutil.rmtree(home, ignore_errors=True)
    inner.rename(home)
    shutil.rmtree(tmp, ignore_errors=True)
    (home / ".ltr-toolkit-ready").write_text(dist.version + "\n")
    return downloaded
