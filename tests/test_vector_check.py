"""``ltr index vectors --existing``: vectors a user's own pipeline wrote pass as the
encoder's when the same model wrote them, run elsewhere, and are refused when another
model did (offline: the check on the vectors; the command, live, in test_vectors.py).

The vectors (tests/data/encoder_agreement.npz, written by
``benchmarks/encoder_agreement.py``): 20 two-word texts encoded by sentence-transformers'
float all-MiniLM-L6-v2 (mean pooling), by the same weights pooled by [CLS], and by
paraphrase-MiniLM-L3-v2 (another model of 384 dimensions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ltr_toolkit.encoders import default_encoder
from ltr_toolkit.errors import UserError
from ltr_toolkit.indexing.vectors import SAME_MODEL_COSINE, check_agreement

FIXTURE = Path(__file__).resolve().parent / "data" / "encoder_agreement.npz"


@pytest.fixture(scope="module")
def sample():
    vectors = dict(np.load(FIXTURE))
    return vectors, default_encoder().encode([str(t) for t in vectors["texts"]])


def test_genuine_vectors_of_short_texts_pass(sample):
    """The float model's vectors agree with the default encoder's at a median of about
    0.985 on short texts (the former threshold, 0.99, refused them)."""
    vectors, mine = sample
    median = check_agreement(vectors["genuine"], mine, "field emb of idx", "minilm", "title")
    assert 0.98 <= median < 0.99
    scaled = check_agreement(7.5 * vectors["genuine"], mine, "field emb of idx", "minilm", "title")
    assert scaled == pytest.approx(median, abs=1e-6)           # any length is compared by angle


@pytest.mark.parametrize("source", ["other", "cls"])
def test_another_models_vectors_are_refused(sample, source):
    vectors, mine = sample
    with pytest.raises(UserError, match=r"field emb of idx does not hold encoder minilm's vectors "
                                        r"of title \(median cosine 0\.[0-5]\d\d over 20 documents"):
        check_agreement(vectors[source], mine, "field emb of idx", "minilm", "title")
    assert np.median((vectors[source] * mine).sum(axis=1)) < SAME_MODEL_COSINE - 0.2   # a wide margin
