"""Where the toolkit keeps what it can make again (document vectors, derived encoders)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$LTR_CACHE``, else ``$XDG_CACHE_HOME/ltr-toolkit``, else ``~/.cache/ltr-toolkit``."""
    base = os.environ.get("LTR_CACHE") or Path(os.environ.get("XDG_CACHE_HOME")
                                                 or Path.home() / ".cache") / "ltr-toolkit"
    return Path(base)
