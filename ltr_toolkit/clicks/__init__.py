"""Judgments from what users do: click models over User Behavior Insights (UBI) data.

UBI records searches in two indices: ``ubi_queries`` (``query_id``, ``user_query``,
``query_response_hit_ids``, ...) and ``ubi_events`` (``action_name`` such as
``impression`` / ``click``, ``query_id``, ``user_query``,
``event_attributes.object.object_id``, ``event_attributes.position.ordinal``, ...).

Modules, each importing only the ones above it in this list (and ``data``/``io``):

* :mod:`.problems` — counts of bad event data (reported, never a crash);
* :mod:`.events` — reading UBI events and query records (NDJSON, the bulk format, or
  documents a search returned) into integer-coded columns;
* :mod:`.sessions` — the vectorised aggregation: one row per (search, shown document)
  with its 0-based position and whether it was clicked;
* :mod:`.groups` — rows alike for every model summed into weighted groups, built a slice
  of searches at a time (bounded working memory);
* :mod:`.clickmodels` — click models (CTR, COEC as the Search Relevance Workbench computes it,
  SDBN, PBM and UBM by EM);
* :mod:`.grades` — priors, the minimum number of impressions, estimates -> grades;
* :mod:`.output` — the judgment list and its per-pair counts, written to files;
* :mod:`.simulate` — a click simulator over a ranked list per query (tests, benchmarks).

The cluster side (the UBI mappings, reading the indices over a time range, writing
simulated events) is :mod:`ltr_toolkit.clicks.ubi`.
"""

#: Examination probabilities below this count as it in inverse propensity weights (a
#: weight ``1 / p`` is at most 10); here, not in :mod:`.debias`, so that the CLI can show
#: it as a default without importing NumPy
DEFAULT_CLIP = 0.1
