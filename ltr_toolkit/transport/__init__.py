"""Talking to the cluster: the connection with its retries and one-line errors
(``client``), facts read once per process (``lookups``), what the connected engine is
(``engine``) and reading a whole index (``pit``). The local node the toolkit provisions
is the package above it, ``localnode``."""
