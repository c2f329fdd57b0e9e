"""When numba's compiled code pays for its start-up: one place for the policy.

numba is a dependency (the lambda kernel is compiled), but loading it costs a process
about 0.45 s before anything runs (measured here: 0.16 s to import, 0.28 s for the first
call of a cached function, which sets up its compiler's target; later cached functions
load in milliseconds). Work that NumPy does in well under that time (small files, a few
thousand rows to score) would only get slower, so a caller asks :func:`pays` with what
the compiled code would save, and takes the NumPy path when it says no. Once numba is
loaded in the process its start-up is paid, and every caller takes the compiled path.
"""

from __future__ import annotations

import sys

#: seconds a process spends loading numba and its first cached function (see above)
START_SECONDS = 0.45


def loaded() -> bool:
    """Whether numba is already imported in this process."""
    return "numba" in sys.modules


def pays(seconds_saved: float) -> bool:
    """Whether compiled code that saves ``seconds_saved`` over NumPy is worth loading."""
    return loaded() or seconds_saved > START_SECONDS
