"""Search stage: run retrievers, fuse their rankings, build hits with snippets and boxes."""
