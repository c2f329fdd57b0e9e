"""The LTR plugin's zip and the engine's plugin command. The zip, first found of:

1. ``$LTR_PLUGIN_ZIP`` (OpenSearch) / ``$LTR_ES_PLUGIN_ZIP`` (Elasticsearch);
2. ``$LTR_HOME/plugins/*.zip``: drop the plugin zips there once and every ``ltr cluster
   start`` and the test suite use them (each zip's ``plugin-descriptor.properties`` says
   which engine and version it is built for);
3. OpenSearch only: Maven Central (``org.opensearch:ltr:<version>:zip``), when it has it.

OpenSearch's k-NN plugin (``org.opensearch.plugin:opensearch-knn``, the semantic
features' vector fields and scoring script) comes from Maven Central next to it. Its zip
carries no native libraries, so only the ``lucene`` engine works (``faiss`` fields kill
the node): the toolkit's mappings use it. Elasticsearch needs no plugin for vectors.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..errors import ProvisionError
from .distributions import OPENSEARCH_DIST, Distribution, zip_engine, zip_version
from .java import Java
from .maven import resolve_artifact
from .state import state_dir


DESCRIPTOR = "plugin-descriptor.properties"


def plugin_installed(home: Path) -> bool:
    plugins = home / "plugins"
    return plugins.is_dir() and any("ltr" in p.name and (p / DESCRIPTOR).is_file()
                                    for p in plugins.iterdir())


def remove_broken_plugins(home: Path, log=lambda msg: None) -> None:
    """Delete plugin folders without their descriptor: what an install killed part-way
    leaves, which the node refuses to start with (and the plugin command to install over)."""
    import shutil
    plugins = home / "plugins"
    for p in (plugins.iterdir() if plugins.is_dir() else ()):
        if p.is_dir() and not (p / DESCRIPTOR).is_file():
            log(f"removing {p.name}: an install that did not finish")
            shutil.rmtree(p, ignore_errors=True)


def plugin_command(home: Path, java: Java, log, dist: Distribution, action: str, what: str,
                    label: str) -> None:
    """``bin/<plugin cli> install|remove what`` of ``dist``, or a one-line error."""
    args = ["install", "--batch", what] if action == "install" else ["remove", what]
    env = dict(os.environ, **{dist.java_env: str(java.home)})
    proc = subprocess.run([str(home / "bin" / dist.plugin_cli), *args], capture_output=True,
                          text=True, env=env)
    if proc.returncode != 0:
        raise ProvisionError(f"{dist.plugin_cli} could not {action} {label}: "
                             + _cause((proc.stderr or proc.stdout).strip().splitlines()))


def _cause(lines: list[str]) -> str:
    """The line of a plugin command's output that says why (a Java exception's message,
    not the stack frame under it)."""
    for ln in lines:
        if "Exception: " in ln:
            return ln.split("Exception: ", 1)[1].strip()
    for ln in lines:
        if ln.lstrip().upper().startswith("ERROR"):
            return ln.strip()
    return next((ln.strip() for ln in reversed(lines) if not ln.lstrip().startswith("at ")), "?")


def plugin_dir() -> Path:
    """The documented folder for a user-supplied plugin zip: ``$LTR_HOME/plugins``."""
    return state_dir() / "plugins"


def supplied_plugin_zip(dist: Distribution = OPENSEARCH_DIST) -> Path | None:
    """The user-supplied LTR plugin zip for ``dist``'s engine: its variable
    (``LTR_PLUGIN_ZIP``, ``LTR_ES_PLUGIN_ZIP``), else of the zips in :func:`plugin_dir`
    built for that engine (by their descriptor, else their name) the one whose descriptor
    names ``dist``'s version, else one without a descriptor version naming its plugin
    version, else any without a descriptor version (a zip built for another version never
    installs); or None."""
    override = os.environ.get(dist.zip_env)
    if override:
        p = Path(override).expanduser()
        if not p.is_file():
            raise ProvisionError(f"{dist.zip_env}={override}: no such file",
                                 "point it at the plugin zip, or unset it")
        return p
    folder = plugin_dir()
    if not folder.is_dir():
        return None
    zips = sorted(p for p in folder.glob("*.zip") if p.is_file() and zip_engine(p) == dist.engine)
    built = [p for p in zips if zip_version(p, dist) == dist.version]
    unknown = [p for p in zips if zip_version(p, dist) is None]   # a zip built for another
    pinned = [p for p in unknown if dist.plugin_version in p.name]  # version is never chosen
    chosen = built or pinned or unknown
    return chosen[-1] if chosen else None


def plugin_zip(log=lambda msg: None, dist: Distribution = OPENSEARCH_DIST) -> Path:
    supplied = supplied_plugin_zip(dist)
    if supplied is not None:
        return supplied
    fix = (f"put the plugin zip ({dist.zip_name}, built for {dist.label} {dist.version}) in "
           f"{plugin_dir()} or set {dist.zip_env}, or point --url/LTR_URL at a cluster "
           "that has the plugin")
    if dist.plugin_artifact is None:
        raise ProvisionError(f"no LTR plugin zip for {dist.label} {dist.version} "
                             "(the plugin is on no registry)", fix)
    try:
        return resolve_artifact(dist.plugin_artifact, log)[0]
    except ProvisionError as exc:
        raise ProvisionError(exc.message, fix) from None
