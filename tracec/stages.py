"""The IR stages a compiled function shows (``fn.ir(stage)``, ``tracec dump
--stage``), in pipeline order; ``ptx`` is the cuda backend's extra stage.
Here, not in ``compiler``, so that the command line can list them without
importing the compiler (xDSL and LLVM: ~0.25 s of every ``tracec run``)."""

STAGES = ("trace", "autodiff", "optimized", "lowered", "llvm", "asm")
