"""Writing the user's documents: indexing a collection (``documents``), their sentence
vectors (``vectors``) and their nearest neighbours' text (``neighbours``)."""
