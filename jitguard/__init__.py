"""jitguard: find, fix and watch Triton kernel arguments that recompile per call."""

__version__ = "0.1.0"
