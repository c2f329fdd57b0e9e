"""What every estimator of the toolkit shares: scikit-learn's conventions without
depending on scikit-learn.

* ``__init__`` stores its arguments unchanged; ``get_params`` / ``set_params`` come from
  its signature (so ``sklearn.base.clone`` and grid searches work);
* the parameters are checked in ``fit``, against the constraints each class declares in
  ``_parameter_constraints`` (scikit-learn's ``_param_validation`` idea: one validator,
  one message shape);
* ``fit`` records ``n_features_in_``; ``predict`` refuses another number of features, and
  raises :class:`NotFittedError` before ``fit``;
* both ``fit(dataset[, valid_dataset])`` and ``fit(X, y, qid=...)`` are accepted.
"""

from __future__ import annotations

import inspect
from numbers import Integral

import numpy as np

from ..data.dataset import RankingDataset


class NotFittedError(ValueError, AttributeError):
    """``predict`` (or an export) before ``fit``: scikit-learn's exception of that name is
    also a ValueError and an AttributeError, so code catching either keeps working."""


class Interval:
    """Numbers of ``kind`` (Integral or Real) between ``low`` and ``high`` (None: no
    bound); ``closed``: "both", "left", "right" or "neither"."""

    def __init__(self, kind, low, high, closed: str = "both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def __call__(self, v) -> bool:
        if isinstance(v, bool) or not isinstance(v, self.kind):
            return False
        lo_ok = self.low is None or (v >= self.low if self.closed in ("both", "left") else v > self.low)
        hi_ok = self.high is None or (v <= self.high if self.closed in ("both", "right") else v < self.high)
        return bool(lo_ok and hi_ok)

    def __str__(self) -> str:
        what = "an int" if self.kind is Integral else "a float"
        left = "[" if self.closed in ("both", "left") and self.low is not None else "("
        right = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        low = "-inf" if self.low is None else self.low
        high = "inf" if self.high is None else self.high
        return f"{what} in the range {left}{low}, {high}{right}"


class Options:
    """One of the given values."""

    def __init__(self, *values):
        self.values = values

    def __call__(self, v) -> bool:
        return any(v is x or (type(v) is type(x) and v == x) for x in self.values)

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(x) for x in self.values)


class Kind:
    """An instance of one of ``types`` (``"boolean"``: True/False, ``callable``)."""

    def __init__(self, *types, name: str | None = None):
        self.types, self.name = types, name

    def __call__(self, v) -> bool:
        return any(callable(v) if t is callable else isinstance(v, t) for t in self.types)

    def __str__(self) -> str:
        return self.name or " or ".join(getattr(t, "__name__", str(t)) for t in self.types)


BOOLEAN = Kind(bool, np.bool_, name="a bool")


class EstimatorParams:
    """The base of the toolkit's estimators (see the module docstring)."""

    #: parameter -> accepted forms (a value passes if any accepts it; None: None is valid)
    _parameter_constraints: dict = {}

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def _validate_params(self) -> None:
        """Each parameter against its declared constraints: a ValueError naming the
        parameter, what it must be, and what it got."""
        for name, accepted in self._parameter_constraints.items():
            value = getattr(self, name)
            if any(value is None if c is None else c(value) for c in accepted):
                continue
            forms = [str(c) for c in accepted if c is not None] + (["None"] if None in accepted else [])
            raise ValueError(f"the {name!r} parameter of {type(self).__name__} must be "
                             f"{' or '.join(forms)}; got {value!r}")

    def _check_fitted(self, attribute: str) -> None:
        if not hasattr(self, attribute):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit() "
                                 "before predict()")

    def _check_n_features(self, X) -> np.ndarray:
        """``X`` as a 2-D array with the number of features seen in ``fit``."""
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D [n_rows, n_features], got shape {X.shape}")
        expected = getattr(self, "n_features_in_", None)
        if expected is not None and X.shape[1] != expected:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is "
                             f"expecting {expected} features as input")
        return X

    def get_params(self, deep: bool = True) -> dict:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; "
                                 f"valid parameters: {', '.join(names)}")
            setattr(self, name, value)
        return self

    def _json_params(self) -> dict:
        """The parameters as plain JSON values (tuples as lists, numpy scalars and dtypes
        as Python values and names), for model artifacts."""
        return {k: _jsonable(v) for k, v in self.get_params().items()}

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not (isinstance(v, type(defaults.get(k))) and _same(v, defaults.get(k)))]
        return f"{type(self).__name__}({', '.join(changed)})"


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _jsonable(v):
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (np.dtype, type)):
        return np.dtype(v).name
    return v


def as_ranking_dataset(X, y, qid) -> RankingDataset:
    """``X, y, qid`` (one query id per row, rows of a query need not be contiguous) as a
    :class:`RankingDataset`: queries in order of first appearance, rows in input order
    within a query. ``meta["input_rows"]`` maps the dataset's rows to the input rows."""
    if y is None or qid is None:
        raise ValueError("fit(X, y, qid=...) needs the labels y and one query id per row (qid)")
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.float64).ravel()
    qid = np.asarray(qid).ravel()
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [n_rows, n_features], got shape {X.shape}")
    if not (len(X) == len(y) == len(qid)):
        raise ValueError(f"X, y and qid must have the same number of rows "
                         f"({len(X)}, {len(y)}, {len(qid)})")
    uniq, first, inv = np.unique(qid, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    position = np.empty_like(by_first)
    position[by_first] = np.arange(len(by_first))
    key = position[inv.ravel()]
    rows = np.argsort(key, kind="stable")
    sizes = np.bincount(key, minlength=len(uniq))
    ds = RankingDataset(X=X[rows], y=y[rows], offsets=np.concatenate([[0], np.cumsum(sizes)]),
                        qids=np.array([str(q) for q in uniq[by_first]], dtype=object))
    ds.meta["input_rows"] = rows
    return ds


def training_sets(X, y, qid, valid):
    """(train, valid) datasets from the two ``fit`` forms: ``fit(dataset[, valid_dataset])``
    and ``fit(X, y, qid=..., valid=(X_valid, y_valid, qid_valid))``."""
    if isinstance(X, RankingDataset):
        if isinstance(y, RankingDataset):           # fit(train, valid): the dataset form
            if valid is not None:
                raise ValueError("validation data given twice")
            valid = y
        elif y is not None or qid is not None:
            raise ValueError("fit(dataset) takes no y or qid: they are in the dataset")
        train = X
    else:
        train = as_ranking_dataset(X, y, qid)
    if valid is not None and not isinstance(valid, RankingDataset):
        try:
            Xv, yv, qv = valid
        except (TypeError, ValueError):
            raise ValueError("valid must be a RankingDataset or a tuple (X, y, qid)") from None
        valid = as_ranking_dataset(Xv, yv, qv)
    return train, valid


#: Rows per batch when transforming or scoring a matrix.
BATCH_ROWS = 1 << 16


def row_batches(n: int):
    """(lo, hi) ranges of at most :data:`BATCH_ROWS` rows covering n rows."""
    return ((lo, min(lo + BATCH_ROWS, n)) for lo in range(0, n, BATCH_ROWS))


def query_batches(offsets):
    """(lo, hi) row ranges of whole queries (``offsets``: each query's first row, then the
    end), each of at most :data:`BATCH_ROWS` rows unless one query alone has more: a
    matrix fed in batches (xgboost's DataIter with ``qid``) must not cut a query in two,
    or it counts two groups."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lo, n = 0, int(offsets[-1]) if len(offsets) else 0
    while lo < n:
        # the last query start within BATCH_ROWS of lo (at least one query past lo)
        cut = int(np.searchsorted(offsets, lo + BATCH_ROWS, side="right")) - 1
        hi = int(offsets[cut]) if offsets[cut] > lo else int(offsets[np.searchsorted(offsets, lo, side="right")])
        yield lo, hi
        lo = hi


__all__ = ["BATCH_ROWS", "BOOLEAN", "EstimatorParams", "Interval", "Kind",
           "NotFittedError", "Options", "as_ranking_dataset", "query_batches", "row_batches",
           "training_sets"]
