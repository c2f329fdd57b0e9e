"""The local node or nodes the toolkit provisions and runs (OpenSearch or Elasticsearch
with the LTR plugin, from Maven Central), above the client it talks to them with:
``distributions`` (what differs between the engines, as data), ``state`` (the per-user
state directory), ``maven`` (artifacts), ``java`` (a JDK that fits), ``plugins`` (the LTR
plugin's zip and the plugin command), ``provision`` (an unpacked distribution with its
plugins), ``process`` (starting, finding and stopping one node), ``cluster`` (N nodes)."""
