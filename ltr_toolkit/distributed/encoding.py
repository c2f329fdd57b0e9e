"""Document vectors encoded on Dask workers (``ltr index jsonl --dask ADDRESS`` /
``--dask local:N``), the same bit for bit as one process computes.

:func:`batches_on` gives ``indexing.vectors.document_vectors`` its ``encode_batches``:
the batches not kept yet are submitted as tasks, a few per worker thread at a time (the
texts of a million products never wait in the scheduler's memory all at once), and each
result is handed back as it completes; the client keeps it on disk (a run killed
part-way resumes there) and reports progress. Each worker process loads the encoder once
(:func:`_worker_encoder`: kept in this module by its spec and hash), with one
onnxruntime thread per task: on a LocalCluster of one-thread workers, each worker is one
core. The encoder encodes one batch the same way wherever it runs (a default-encoder
text is encoded alone, the same with 1, 2 or the runtime's default threads), so the
vectors are those of one process where the workers' CPUs encode as this machine's do:
each result carries its worker's :func:`~ltr_toolkit.encoders.fingerprint`, and one of
another CPU (onnxruntime's integer kernels differ by instruction set) is refused.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

import numpy as np

from ..encoders import ENV, Encoder, fingerprint, load_encoder
from ..errors import UserError

#: each worker process's encoders, by (spec, sha256)
_worker_encoders: dict = {}
#: tasks in flight per worker thread
IN_FLIGHT = 2


def _worker_encoder(spec: str | None, sha256: str) -> Encoder:
    """The encoder ``spec`` names, loaded once in this worker process (one onnxruntime
    thread per call); one line when it is not the client's model (``sha256``)."""
    key = (spec, sha256)
    if key not in _worker_encoders:
        encoder = load_encoder(spec, threads=1)
        if encoder.sha256 != sha256:
            raise UserError(f"a Dask worker's encoder {encoder.name} ({encoder.sha256[:12]}) is not "
                            f"this run's ({sha256[:12]})",
                            f"give the workers the same model ({ENV}: {spec or 'the default'})")
        _worker_encoders[key] = encoder
    return _worker_encoders[key]


def encode_task(spec: str | None, sha256: str, texts: list[str]) -> tuple[np.ndarray, bytes]:
    """On a worker: the document vectors of ``texts`` and the worker's fingerprint."""
    encoder = _worker_encoder(spec, sha256)
    return encoder.encode(texts, kind="document"), fingerprint(encoder)


def batches_on(client, spec: str | None = None):
    """``encode_batches(encoder, [(start, texts), ...])`` yielding (start, vectors) as the
    workers of ``client`` (a ``distributed.Client``) finish them. ``spec``: the encoder
    the workers load (default: ``$LTR_ENCODER`` here, else the default encoder)."""
    spec = spec or os.environ.get(ENV) or None

    def encode_batches(encoder: Encoder, todo):
        yield from _gathered(client, spec, encoder, todo)
    return encode_batches


def _gathered(client, spec: str | None, encoder: Encoder, todo):
    from distributed import as_completed
    mine, queue = fingerprint(encoder), iter(todo)
    running, pending = as_completed(), {}

    def submit() -> None:
        item = next(queue, None)
        if item is not None:
            future = client.submit(encode_task, spec, encoder.sha256, item[1], pure=False)
            pending[future] = item[0]
            running.add(future)
    for _ in range(IN_FLIGHT * max(1, sum(client.nthreads().values()))):
        submit()
    try:
        for future in running:
            vecs, theirs = future.result()
            if theirs != mine:
                raise UserError("a Dask worker encodes differently from this machine (another "
                                "CPU: onnxruntime's integer kernels differ), its vectors would "
                                "not be this machine's",
                                "run the workers on machines of this one's CPU, or encode here "
                                "(without --dask)")
            submit()
            yield pending.pop(future), vecs
    finally:
        client.cancel(list(pending))


def leaves_node_cores(client, node_url: str) -> bool:
    """Whether the workers of ``client`` leave the search node at ``node_url`` cores of
    its own, so that it can find the neighbours while they encode: the node runs on
    another machine than this one, or the workers on this machine have fewer threads in
    all than it has cores. Where they would share them, the encoding and the node's
    searches at the same time took longer than one after the other (50,000 products on
    2 one-thread workers and a node on 2 cores: 420 s, against about 385 s)."""
    if not _here(urlsplit(node_url).hostname):
        return True
    mine = sum(n for address, n in client.nthreads().items()
               if address.startswith("inproc:") or _here(urlsplit(address).hostname))
    return mine < (os.cpu_count() or 1)


def _here(host: str | None) -> bool:
    """Whether ``host`` (None: an in-process address) is this machine."""
    if not host or host == "localhost":
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    try:
        name = socket.gethostname()
        return host in {name, socket.getfqdn(), *socket.gethostbyname_ex(name)[2]}
    except OSError:
        return False
