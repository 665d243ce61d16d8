"""pagesight's benchmarks: each a module run as ``python -m benchmarks.NAME`` from the repository's
root, on the shared harness (``benchmarks/harness.py``); benchmarks/README.md lists them."""
