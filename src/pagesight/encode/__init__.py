"""Encode stage: lexical (BM25) and dense text retrievers over tiles."""
