"""Ingestion: files are read in worker processes with time and memory limits, then committed."""
