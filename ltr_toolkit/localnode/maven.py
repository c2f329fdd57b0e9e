"""Artifacts from Maven Central, through ``mvn dependency:get`` into the Maven repository
(``$LTR_MAVEN_REPO`` or ``~/.m2/repository``), so a second provisioning reuses them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

from ..errors import ProvisionError


def maven_repo() -> Path:
    return Path(os.environ.get("LTR_MAVEN_REPO") or Path.home() / ".m2" / "repository")


def artifact_path(coords: tuple[str, str, str, str]) -> Path:
    group, artifact, version, ext = coords
    return maven_repo().joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.{ext}")


def coords_str(coords) -> str:
    return ":".join(coords)


def resolve_artifact(coords: tuple[str, str, str, str], log=lambda msg: None) -> tuple[Path, bool]:
    """Return (path, downloaded): the artifact in the local Maven repo, fetched if absent
    (``log`` hears the bytes downloaded so far, every few seconds)."""
    path = artifact_path(coords)
    if path.is_file() and path.stat().st_size > 0:
        return path, False
    mvn = shutil.which("mvn")
    if not mvn:
        raise ProvisionError(
            f"cannot fetch {coords_str(coords)}: no `mvn` on PATH",
            "install Maven (apt-get install maven) or point --url at an existing cluster")
    group, artifact, version, ext = coords
    cmd = [mvn, "-q", "-B", "-U", f"-Dmaven.repo.local={maven_repo()}",
           "dependency:get", f"-Dartifact={group}:{artifact}:{version}:{ext}",
           "-Dtransitive=false"]
    log(f"downloading {coords_str(coords)} through Maven")
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        output = _wait_reporting(proc, path.parent, log)
    if proc.returncode != 0 or not path.is_file():
        msg = _mvn_reason(output)
        raise ProvisionError(
            f"Maven could not resolve {coords_str(coords)}: {msg}")
    return path, True


def _wait_reporting(proc: subprocess.Popen, folder: Path, log, every: float = 3.0) -> str:
    """Wait for ``proc``, reporting the bytes under ``folder`` (where Maven writes the
    download) every ``every`` seconds; returns its output."""
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    t0 = time.monotonic()
    while proc.poll() is None:
        time.sleep(0.2)
        if time.monotonic() - t0 >= every:
            t0 = time.monotonic()
            size = sum(f.stat().st_size for f in folder.glob("*") if f.is_file()) if folder.is_dir() else 0
            log(f"  {size / 1e6:.0f} MB downloaded")
    reader.join(timeout=5)
    return "".join(chunks)


def _mvn_reason(output: str) -> str:
    for line in output.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        m = re.search(r"(Could not (find|transfer|resolve) .*|\S+ was not found in \S+)", line)
        if m:
            return m.group(1).strip()
    tail = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in output.strip().splitlines()[-1:]]
    return tail[0] if tail else "mvn failed without a message"
