"""Judgments from clicks: click models over the rows of :mod:`ltr_toolkit.clicks.events`,
the model chosen on held-out searches, grades, and the files they are written to.

Modules, each importing only the ones above it in this list (and
:mod:`ltr_toolkit.clicks.events`):

* :mod:`.clickmodels` — click models (CTR, COEC as the Search Relevance Workbench computes
  it, SDBN, PBM and UBM by EM);
* :mod:`.heldout` — every model fitted on the earlier searches and scored on the later
  ones (``--model auto``);
* :mod:`.grades` — the minimum number of impressions, estimates -> grades;
* :mod:`.output` — the judgment list and its per-pair counts, written to files;
* :mod:`.judge` — events -> judgments in one call (``ltr judgments clicks``, the click job).
"""
