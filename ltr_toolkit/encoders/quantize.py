"""The default encoder's fast form, derived on this machine from the packaged model.

The packaged all-MiniLM-L6-v2 file stores its weights as int8 plus a scale and turns them
back into float32 at every call (``Cast`` then ``Mul``), then multiplies in float32:
2.9 ms for a one-query batch on two cores. Deriving, once per machine (a few seconds, no
download):

1. fold those weights into float32 constants (the same numbers the packaged file computes
   at run time: its vectors are unchanged);
2. let onnxruntime fuse the graph (layer norms, GELU, attention) and save it;
3. quantise it dynamically with onnxruntime's own quantiser: int8 weights per output
   channel, activations quantised per call (integer matrix products, VNNI where the CPU has
   it): about 1.7 ms per query, vectors within cosine 0.99 of the packaged file's.

The result is written atomically in the toolkit's cache (``$LTR_CACHE/encoders/``) and named by the source
file's hash and :data:`RECIPE`; the encoder's identity (recorded with every vector) is that
source hash and recipe, so the same package gives the same identity on every machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..io.cache import cache_dir

#: names the derivation; change it whenever the steps above change
RECIPE = "fold-fuse-dynamic-int8-per-channel-v1"


def fold_weight_casts(model) -> int:
    """Replace every ``Cast`` of an initializer, and a ``Mul`` of two constants, by its
    value as a float32 initializer (in place); the number of nodes folded."""
    from onnx import numpy_helper
    graph = model.graph
    const = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    keep, folded = [], 0
    for node in graph.node:
        if all(name in const for name in node.input) and node.op_type in ("Cast", "Mul"):
            a = const[node.input[0]]
            value = (a.astype(np.float32) if node.op_type == "Cast"
                     else np.multiply(a, const[node.input[1]]))
            const[node.output[0]] = value
            folded += 1
        else:
            keep.append(node)
    used = {name for node in keep for name in node.input} | {o.name for o in graph.output}
    del graph.node[:]
    graph.node.extend(keep)
    del graph.initializer[:]
    graph.initializer.extend(numpy_helper.from_array(np.ascontiguousarray(v), name)
                             for name, v in const.items() if name in used)
    return folded


def derive(source: Path, target: Path) -> Path:
    """Write the fast form of ``source`` (an int8-weights ONNX file) to ``target``."""
    try:    # imported here: needed once per machine, and onnx takes a while to import
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:  # pragma: no cover - base dependencies
        raise UserError(f"deriving the encoder needs {exc.name}", "pip install ltr-toolkit again") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        folded, fused, quant = (Path(tmp) / n for n in ("folded.onnx", "fused.onnx", "quant.onnx"))
        model = onnx.load(str(source))
        fold_weight_casts(model)
        onnx.save(model, str(folded))
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(fused)
        ort.InferenceSession(str(folded), opts, providers=["CPUExecutionProvider"])
        with _root_untouched():
            quantize_dynamic(str(fused), str(quant), per_channel=True, weight_type=QuantType.QInt8)
        os.replace(quant, target)
    return target


@contextlib.contextmanager
def _root_untouched():
    """onnxruntime's quantiser logs its advice to pre-process (done in step 2) with the
    root logger's module functions (``logging.warning``), which configure the root logger
    when it has no handler (``logging.basicConfig``): from then on every library's warnings
    in the process would print as ``WARNING:name:...`` lines (the client's 404s among
    them). Its advice is silenced, and a handler of our own while it runs leaves the root
    logger as it was."""
    root, guard = logging.getLogger(), logging.NullHandler()
    root.addHandler(guard)
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
        root.removeHandler(guard)


def derived_path(source: Path, source_sha256: str) -> Path:
    """Where the fast form of ``source`` lives (derived when missing)."""
    target = cache_dir() / "encoders" / f"{source_sha256[:16]}-{RECIPE}" / "model.onnx"
    if not target.is_file():
        derive(source, target)
    return target
