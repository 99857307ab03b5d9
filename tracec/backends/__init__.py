"""Backends: run optimized tracec IR (interp: NumPy; cpu: LLVM)."""
