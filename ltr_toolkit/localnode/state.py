"""The per-user state directory the local node lives in, outside any repository:

* ``$LTR_HOME`` when set;
* else ``/var/lib/ltr-toolkit`` when running as root (neither engine runs as root, so
  the node runs as the unprivileged user ``nobody`` and its files must be reachable by
  it);
* else ``$XDG_STATE_HOME/ltr-toolkit`` (default ``~/.local/state/ltr-toolkit``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ..errors import ProvisionError

UNPRIVILEGED_USER = "nobody"


def state_dir() -> Path:
    env = os.environ.get("LTR_HOME")
    if env:
        return Path(env).expanduser()
    if os.geteuid() == 0:
        return Path("/var/lib/ltr-toolkit")
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "ltr-toolkit"


@contextlib.contextmanager
def state_lock():
    root = state_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def chown_tree(path: Path) -> None:
    if os.geteuid() != 0:
        return
    import pwd
    pw = pwd.getpwnam(UNPRIVILEGED_USER)
    for root, dirs, files in os.walk(path):
        os.chown(root, pw.pw_uid, pw.pw_gid)
        for name in files:
            os.lchown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)


def check_reachable(root: Path) -> None:
    """As root the node runs as `nobody`: every parent of the state dir must be traversable."""
    for parent in [root, *root.parents]:
        if not os.stat(parent).st_mode & 0o001:
            raise ProvisionError(
                f"the node runs as `{UNPRIVILEGED_USER}` (OpenSearch refuses root) but cannot "
                f"enter {parent}", "set LTR_HOME to a directory under /var/lib or /var/tmp")
