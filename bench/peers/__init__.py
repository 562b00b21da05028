"""Benchmark peers vendored from other projects (see each file's header for source and licence)."""
