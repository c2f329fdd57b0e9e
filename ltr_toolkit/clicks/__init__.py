"""Judgments from what users do: click models over User Behavior Insights (UBI) data.

UBI records searches in two indices: ``ubi_queries`` (``query_id``, ``user_query``,
``query_response_hit_ids``, ...) and ``ubi_events`` (``action_name`` such as
``impression`` / ``click``, ``query_id``, ``user_query``,
``event_attributes.object.object_id``, ``event_attributes.position.ordinal``, ...).

Packages and modules, each importing only the ones above it in this list (and
``data``/``io``/``rank``/``transport``):

* :mod:`.events` — UBI events in (files, the cluster's indices), one
  :class:`.events.eventlog.EventLog` out, its problems counted, and the rows per
  (search, shown document) and their weighted groups that every click model reads;
* :mod:`.judging` — judgments from clicks: click models (CTR, COEC as the Search
  Relevance Workbench computes it, SDBN, PBM and UBM by EM), the model chosen on held-out
  searches, grades, the judgment list and its counts written to files;
* :mod:`.debias` — training data straight from clicks and its inverse examination
  propensities (``ltr train --propensity``);
* :mod:`.interleaving` — interleaved searches' UBI records and the clicks credited to
  their teams;
* :mod:`.simulate` — a click simulator over a ranked list per query (tests, benchmarks).
"""

#: Examination probabilities below this count as it in inverse propensity weights (a
#: weight ``1 / p`` is at most 10); here, not in :mod:`.debias`, so that the CLI can show
#: it as a default without importing NumPy
DEFAULT_CLIP = 0.1
