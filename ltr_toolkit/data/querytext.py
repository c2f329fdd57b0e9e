"""Long queries within the cluster's clause limit, the same way at logging and serving.

Every ``{{keywords}}`` a feature (or the first stage) analyses turns each distinct term
into a clause; a query of a few hundred words times a dozen features passes the
cluster's ``indices.query.bool.max_clause_count`` (1,024 on many clusters, often not the
user's to change) and the node rejects it. The toolkit measures how many distinct terms
the cluster accepts for a feature set and first stage (``query.clauses``) and, for a
query with more distinct words than that, sends its first ``max_terms`` distinct words
(lower-cased, in order of first appearance, without the 33 English stop words Lucene's
English analyzer drops). A query within the budget is sent as it is. The rule is pure
text: logging, training, ``ltr query search``, ``ltr evaluate`` and users' own code apply it
with the same ``max_terms`` (recorded in the logged data's sidecar and the model artifact).
"""

from __future__ import annotations

import re

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``.
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split())

_WORD = re.compile(r"\w+", re.UNICODE)

#: The name of the rule :func:`fit_keywords` applies, recorded with each model's serving
#: contract (``stores.contract``): a model is served with the rule it was evaluated with.
SHORTENING = "first-distinct-words-without-stop-words"


#: the parameter that carries a query's text to the first stage and the features
KEYWORDS = "keywords"


def distinct_words(text: str) -> list[str]:
    """Distinct lower-cased words of ``text``, in order of first appearance."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))


def fit_keywords(text: str, max_terms: int | None) -> str:
    """``text`` itself when it has at most ``max_terms`` distinct words (or no limit is
    given); else its first ``max_terms`` distinct words that are not stop words."""
    if max_terms is None:
        return text
    if max_terms < 1:
        raise ValueError(f"max_terms {max_terms}: expected a whole number >= 1")
    words = distinct_words(text)
    if len(words) <= max_terms:
        return text
    return " ".join([w for w in words if w not in STOP_WORDS][:max_terms])


def fit_params(params: dict, max_terms: int | None) -> dict:
    """Template parameters with ``keywords`` fitted (see :func:`fit_keywords`)."""
    if max_terms is None or KEYWORDS not in params:
        return params
    return {**params, KEYWORDS: fit_keywords(str(params[KEYWORDS]), max_terms)}
