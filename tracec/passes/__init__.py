"""IR passes: autodiff, simplification, fusion (each an xDSL ModulePass)."""
