"""Serving a model: reranked searches with their fallbacks (``rerank``) and the
``Serving`` object that names everything a model is served with (``serving``)."""
