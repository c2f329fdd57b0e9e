"""A JDK the engine runs on."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProvisionError
from .distributions import OPENSEARCH_DIST, Distribution


@dataclass
class Java:
    home: Path
    version: int
    source: str


def _java_version(home: Path) -> int | None:
    release = home / "release"
    if release.is_file():
        m = re.search(r'JAVA_VERSION="(\d+)', release.read_text(errors="replace"))
        if m:
            return int(m.group(1))
    java = home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return int(m.group(1)) if m else None


def find_java(dist: Distribution = OPENSEARCH_DIST) -> Java:
    """A JDK ``dist`` runs on: its own variable (``OPENSEARCH_JAVA_HOME``,
    ``ES_JAVA_HOME``), ``$JAVA_HOME``, else the newest fitting one under /usr/lib/jvm."""
    lo, hi = dist.java
    fits = lambda v: v is not None and v >= lo and (hi is None or v <= hi)  # noqa: E731
    seen = []
    for var in (dist.java_env, "JAVA_HOME"):
        val = os.environ.get(var)
        if val:
            v = _java_version(Path(val))
            seen.append(f"{var}={val} (Java {v or '?'})")
            if fits(v):
                return Java(Path(val), v, var)
    candidates = []
    for base in (Path("/usr/lib/jvm"), Path("/usr/local/lib/jvm"), Path("/opt/java")):
        if base.is_dir():
            for home in sorted(base.iterdir()):
                if home.is_symlink() or not (home / "bin" / "java").is_file():
                    continue
                v = _java_version(home)
                seen.append(f"{home} (Java {v or '?'})")
                if fits(v):
                    candidates.append((v, home))
    if candidates:
        v, home = max(candidates)
        return Java(home, v, "scan")
    want = f"Java {dist.java_range()}" if hi else f"Java >= {lo}"
    raise ProvisionError(
        f"no {want} found for {dist.label} {dist.version}; found: {', '.join(seen) or 'nothing'}",
        f"install a JDK ({want}) and set {dist.java_env}")
