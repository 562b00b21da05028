"""The static side: discover kernels and launches, classify argument provenance, rules, codemod."""
