"""Benchmark peers: other projects' code, loaded at run time from their released packages (never committed)."""
