"""Imports flow one way (DESIGN.md "Layers and imports"): a module may
import only from its own layer or the layers below it."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tracec"

# Lowest first.  A module belongs to the first prefix that matches.
LAYERS = [
    ("base", ["tracec.dtypes", "tracec._C", "tracec.torch_function_switch", "tracec.version", "tracec.torch_version", "tracec.data", "tracec.symbolic",
              "tracec.sdp_flags",
              "tracec.return_types",
              "tracec.mutation", "tracec.threads", "tracec.stages", "tracec.torch_rng",
              "tracec.aten_vec",
              "tracec.removable_handle", "tracec.graph_hooks", "tracec.node_views",
              "tracec.arg_arrays", "tracec.mem_overlap"]),
    ("ir", ["tracec.ir"]),
    ("ops", ["tracec.ops"]),
    ("frontend", ["tracec.device", "tracec.meta_array", "tracec.graph", "tracec.tensor", "tracec.functions",
                  "tracec.shape_ops", "tracec.indexing", "tracec.creation", "tracec.methods",
                  "tracec.autograd", "tracec.nn", "tracec.optim", "tracec.serialization",
                  "tracec.serialization_pickle",
                  "tracec.pytree", "tracec.utils", "tracec.types", "tracec.distributions",
                  "tracec.torch_checkpoint", "tracec.torch_save", "tracec.torch_names",
                  "tracec.accelerator",
                  "tracec.cuda",
                  "tracec.rearrange", "tracec.sorting", "tracec.topk_order", "tracec.contraction",
                   "tracec.methods_extra", "tracec.sparse", "tracec.sparse_rows", "tracec.sparse_compressed",
                   "tracec.quasirandom", "tracec.special_bessel", "tracec.special_polynomials",
                   "tracec.nested", "tracec.wrapper_dispatch", "tracec.masked", "tracec.aten_report",
                  "tracec.tensor_type", "tracec.amp",
                  "tracec.reductions_bool", "tracec.out_arg", "tracec.numpy_names", "tracec.distributed",
                  "tracec.tensor_meta", "tracec.storage", "tracec.shape_extra", "tracec.composite_views", "tracec.scatter_ops", "tracec.fake_quant",
                  "tracec.select_ops", "tracec.search_ops", "tracec.strided_views",
                  "tracec.multiprocessing", "tracec.tensor_str",
                  "tracec.autocast_mode", "tracec.cpu", "tracec.jit",
                  "tracec.math_extra", "tracec.math_trig", "tracec.math_special",
                  "tracec.math_igamma", "tracec.math_int",
                  "tracec.math_methods", "tracec.reductions_extra", "tracec.quickselect", "tracec.linalg",
                  "tracec.linalg_lapack", "tracec.linalg_householder", "tracec.linalg_gauss_jordan", "tracec.linalg_substitution", "tracec.linalg_det", "tracec.blas_dot", "tracec.expand_writes", "tracec.linalg_ldl", "tracec.lapack_lu", "tracec.linalg_grads", "tracec.lowrank", "tracec.special",
                  "tracec.control_flow", "tracec.fx", "tracec.overrides", "tracec.__config__", "tracec.__future__",
                  "tracec.subclass_dispatch",
                  "tracec.onnx",
                  "tracec.binning",
                  "tracec.differences", "tracec.autograd_functional", "tracec.func",
                  "tracec.random_inplace",
                  "tracec.aten_functional", "tracec.random", "tracec.windows",
                  "tracec.aten_extra", "tracec.foreach_ops", "tracec.hub", "tracec.mps", "tracec.xpu",
                  "tracec.testing", "tracec.methods_compat", "tracec.profiler",
                  "tracec.numpy_names",
                  "tracec.config", "tracec.vision", "tracec.complex_ops", "tracec.fft",
                  "tracec.stft", "tracec.signal", "tracec.sym_scalar", "tracec.item_value",
                  "tracec.runtime_int", "tracec.runtime_index", "tracec.fused_eager",
                  "tracec.ao", "tracec.quantization", "tracec.futures", "tracec._tensor_str", "tracec.streams",
                  "tracec._subclasses", "tracec._utils", "tracec._functorch"]),
    ("tracing", ["tracec.tracing", "tracec.guards", "tracec.sym_shapes", "tracec.naming",
                 "tracec.complex_trace", "tracec.attr_replay", "tracec.lifted_state",
                 "tracec.arg_dict_writes",
                 "tracec.runtime_reads", "tracec.view_outputs", "tracec.traced_tensor_hooks"]),
    ("passes", ["tracec.passes"]),
    ("backends", ["tracec.backends"]),
    ("compiler", ["tracec.compiler", "tracec.compiled_backward", "tracec.compiled_entry",
                  "tracec.compiled_module",
                  "tracec.kernel_profiler", "tracec.size_generic", "tracec.fast_call",
                  "tracec.fast_run", "tracec.eager_kernels", "tracec.code_cache"]),
    ("tools", ["tracec.aot", "tracec.demo", "tracec.cli", "tracec.__init__", "tracec.graphview",
               "tracec.explain", "tracec._dynamo", "tracec._dynamo_parts", "tracec._inductor",
               "tracec.as_torch", "tracec.einops_backend", "tracec.library",
               "tracec.export", "tracec.aten_ops", "tracec._ops", "tracec.torch_shim",
               # torch._VF and torch.functional: aliases of the top-level namespace
               "tracec._VF", "tracec.functional",
               # torchrun and torch.distributed.launch: launchers, as the CLI
               "tracec.distributed.run", "tracec.distributed.launch"]),
]
# What each layer may import besides itself (DESIGN.md's arrows).
ALLOWED = {
    "base": set(),
    "ir": {"base"},
    "ops": {"base"},
    "frontend": {"base", "ops"},
    "tracing": {"base", "ops", "ir", "frontend"},
    "passes": {"base", "ops", "ir"},
    "backends": {"base", "ops", "ir", "passes"},
    "compiler": {"base", "ops", "ir", "frontend", "tracing", "passes", "backends"},
    "tools": {"base", "ops", "ir", "frontend", "tracing", "passes", "backends", "compiler"},
}


def layer_of(module: str):
    """The layer of the longest prefix of ``module`` listed (a tool module
    inside a frontend package, as ``tracec.distributed.run``, is a tool)."""
    best, best_len = None, -1
    for name, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = name, len(p)
    return best


def imports(path: pathlib.Path, module: str):
    tree = ast.parse(path.read_text())
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                yield (full if layer_of(full) else base), node.lineno


def test_imports_flow_one_way():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        module = ".".join(rel.parts)
        if module.endswith(".__init__") and module != "tracec.__init__":
            module = module[: -len(".__init__")]
        here = layer_of(module)
        assert here is not None, f"{module} is in no layer: add it to LAYERS"
        for target, line in imports(path, module):
            if not target.startswith("tracec"):
                continue
            if target == "tracec":
                if here != "tools":
                    bad.append(f"{module}:{line} imports the whole package")
                continue
            there = layer_of(target)
            if there is None or there == here:
                continue
            if there not in ALLOWED[here]:
                bad.append(f"{module}:{line} ({here}) imports {target} ({there})")
    assert not bad, "\n".join(bad)


def test_plain_import_leaves_the_compiler_out():
    """``import tracec`` is the eager library: xDSL and llvmlite (and tracec's
    own compiler modules) load only when something compiles (issue 12, goal
    6).  Eager ops still run, and ``tracec.compile`` loads them on first use."""
    import subprocess
    import sys
    code = (
        "import sys, tracec\n"
        # (scipy: no dependency of tracec's; a module importing it at import
        # time broke `pip install -e . && tracec demo` on a fresh machine)
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('xdsl', 'llvmlite', 'scipy')\n"
        "               or m.startswith(('tracec.ir', 'tracec.tracing', 'tracec.compiler',\n"
        "                                'tracec.passes', 'tracec.backends.cpu')))\n"
        "assert not heavy, heavy\n"
        "x = tracec.ones(3, requires_grad=True)\n"
        "y = (x * 2 + tracec.nn.functional.relu(x)).sum()\n"
        "y.backward()\n"
        "assert x.grad.tolist() == [3.0, 3.0, 3.0], x.grad\n"
        "assert 'xdsl' not in sys.modules\n"
        "f = tracec.compile(lambda a: a + 1, backend='interp')\n"
        "assert f(tracec.ones(2)).tolist() == [2.0, 2.0]\n"
        "assert 'xdsl' in sys.modules and tracec.TraceError.__name__ == 'TraceError'\n"
        "assert 'compile' in dir(tracec) and tracec.ir.__name__ == 'tracec.ir'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
