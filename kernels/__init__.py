"""Corrected Triton kernels shipped by jitguard (installed as ``jitguard.kernels``)."""
