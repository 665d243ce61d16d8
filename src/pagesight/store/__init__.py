"""Store stage: the SQLite catalog and the derived retriever files of an index directory."""
