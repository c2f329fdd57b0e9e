"""UBI events in, one :class:`.eventlog.EventLog` out, and the rows every click model reads.

Modules, each importing only the ones above it in this list (and ``errors``,
``transport``):

* :mod:`.problems` — counts of bad event data (reported, never a crash);
* :mod:`.eventlog` — the event log: interned strings, integer-coded event columns, the
  query records; :class:`.eventlog.EventReader` adds documents one by one;
* :mod:`.columns` — documents parsed by pyarrow into the event log as the line reader
  adds them: the rows classified, the problems counted, the strings interned;
* :mod:`.files` — the one UBI file reader (NDJSON or bulk): blocks parsed by pyarrow
  into columns, a block it cannot read added line by line;
* :mod:`.pages` — the cluster's search pages of UBI documents, parsed by pyarrow into
  the same columns;
* :mod:`.ubi` — the cluster's UBI indices: their mappings, reading them over a time range
  (a page at a time, :mod:`.pages`), writing (simulated) events;
* :mod:`.sessions` — the vectorised aggregation: one row per (search, shown document)
  with its 0-based position and whether it was clicked;
* :mod:`.groups` — rows alike for every model summed into weighted groups, built a slice
  of searches at a time (bounded working memory).
"""
