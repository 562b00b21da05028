"""One module per rule code (jg001.py ...); this package holds the registry."""
