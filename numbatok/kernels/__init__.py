"""Helpers shared by the CPU drivers and the CUDA kernels (register_jitable: one source, two targets)."""
