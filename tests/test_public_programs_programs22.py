"""Public programs exercising less common PyTorch APIs
(``tests/programs/programs22``), run under ``tracec run`` against torch
2.13's recorded output:

- func_autograd_function.py: PyTorch's docs notes/extending.func.rst —
  autograd.Function with setup_context under torch.func (numpy-backed
  NumpySort / NumpyTake with vmap and jvp staticmethods, MyCube with
  generate_vmap_rule and second-order grads; grad / vmap / jacrev / jacfwd /
  jvp / vjp, hessian refused for want of a jvp);
- complex_layers.py: wavefrontshaping/complexPyTorch (complex64 layers from
  pairs of real ones, complex ReLU / max pooling by modulus with the phase
  gathered by index, complex batch norm whitening with complex buffers);
- pygat_sparse.py: Diego999/pyGAT's sparse GAT (an old-style
  autograd.Function saving a sparse COO tensor, sparse @ dense, a._indices()
  in backward, early stopping through torch.save / torch.load);
- extending_torch_function.py: PyTorch's docs' "Extending torch"
  (Tensor-like ScalarTensor / MetadataTensor with a classmethod
  __torch_function__, an ``implements`` table, Tensor subclasses and a
  LoggingTensor calling super().__torch_function__);
- functorch_legacy.py: the pre-2.0 functorch API (make_functional,
  per-sample grads with vmap(grad), combine_state_for_ensemble ensembles
  with BatchNorm buffers);
- neural_ode_adjoint.py: msurtsukov/neural-ode's hand-written adjoint
  method (an autograd.Function whose backward integrates the augmented
  system with torch.autograd.grad under set_grad_enabled inside no_grad);
- dann_grl.py: arthurdouillard/deepcourse's DANN with a gradient reversal
  Function that returns its input as-is (default argument, one trailing
  None gradient).
"""
import pathlib

import pytest

from library_programs import check_library_program

PROGS = pathlib.Path(__file__).resolve().parent / "programs" / "programs22"

CASES = ["func_autograd_function.py", "complex_layers.py", "pygat_sparse.py",
         "extending_torch_function.py",
         "functorch_legacy.py",
         "neural_ode_adjoint.py",
         "dann_grl.py"]


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs22_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, (), tmp_path)
