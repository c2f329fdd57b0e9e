"""ltr-toolkit: learning to rank for OpenSearch/Elasticsearch with the LTR plugin."""

__version__ = "0.1.0"
