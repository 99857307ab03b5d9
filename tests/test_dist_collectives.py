"""torch.distributed's rooted collectives (reduce, gather, scatter), the
reduce-scatters, all_to_all, the object collectives, batched point-to-point
and their helpers, over the gloo backend among processes the script starts:
``tests/programs/dist/gloo_collectives.py`` prints what PyTorch 2.13 prints
(recorded).  They were missing (AttributeError), and all_gather_into_tensor
failed on gloo groups.  The MPI side of the same functions, eager and
compiled: tests/distributed/worker.py ``case_rooted``."""
import os
import pathlib

from test_models41_gaps import _free_ports
from test_public_programs_tutorials2 import ENV, check_program
from vision_oracle import recorded_torch_output

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROG = ROOT / "tests" / "programs" / "dist" / "gloo_collectives.py"


def test_gloo_collectives_print_what_torch_prints(tmp_path):
    env = {**ENV, "GLOO_TEST_PORT": str(_free_ports(3))}
    ref = recorded_torch_output(PROG, tmp_path, env, "OMP_NUM_THREADS=1 vision_oracle.torch_command")
    check_program(PROG, ref, tmp_path, False, env=env)


def test_deprecated_names_warn_as_torch_does():
    import warnings

    import tracec.distributed as dist
    for name, new in (("all_gather_into_tensor", "all_gather_single"),
                      ("reduce_scatter_tensor", "reduce_scatter_single")):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                getattr(dist, name)(None, None)
            except TypeError:
                pass
        assert any(issubclass(x.category, FutureWarning) and
                   f"`torch.distributed.{name}` is deprecated. Please use "
                   f"`torch.distributed.{new}` instead." == str(x.message) for x in w), w
    os.environ.pop("LOCAL_RANK", None)
    assert dist.get_node_local_rank(fallback_rank=3) == 3
