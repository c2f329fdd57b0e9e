"""Talking to the cluster: the connection with its retries and one-line errors
(``client``), facts read once per process (``lookups``), and the local node or nodes the
toolkit provisions from Maven Central (``localnode``, ``localcluster``)."""
