"""The ``tracec`` command line (click): ``demo``, ``dump`` (IR text, or a
graph: ``--format dot|html``), ``explain``, ``run`` (a PyTorch script on
tracec), and (with the CPU backend) ``build`` and ``cache``.

Invariant: bad input (no such file or function, a malformed ``--arg``, an
unsupported op) exits non-zero with a one-line ``Error: ...`` message,
never a traceback.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
import traceback

import click

import tracec
from tracec import dtypes as dt
from tracec.aot import TARGET_NAMES
from tracec.stages import STAGES

_ARG_RE = re.compile(r"^([A-Za-z_][A-Za-z_0-9]*)=([a-z0-9]+)\[([^\]]*)\]$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
#: The example value of the first named size traced with no ``--size``
#: (then 24, 25...: distinct names get distinct values, so the trace does
#: not take them for one size); an odd prime, unlikely to equal a layer's
#: width, whose comparisons would become the library's size guards.
FIRST_EXAMPLE_SIZE = 23


def parse_arg(text: str):
    """``NAME=f32[64,784]`` -> (name, dtype, shape); a named size
    (``x=f32[B,784]``) stays its name (a str) in the shape."""
    m = _ARG_RE.match(text.strip())
    if not m:
        raise click.UsageError(f"malformed --arg {text!r}: expected NAME=DTYPE[D0,D1,...], "
                               "e.g. x=f32[64,784] or x=f32[B,784]")
    name, dname, dims = m.groups()
    try:
        dtype = dt.to_dtype(dname)
    except TypeError:
        raise click.UsageError(f"malformed --arg {text!r}: unknown dtype {dname!r} "
                               "(use f32, f64, f16, bf16, i32, i64 or bool)") from None
    shape = []
    for d in dims.replace(" ", "").replace("\t", "").split(","):
        if not d:
            continue
        if d.isdigit():
            shape.append(int(d))
        elif _NAME_RE.match(d):
            shape.append(d)
        else:
            raise click.UsageError(f"malformed --arg {text!r}: the size {d!r} is neither a "
                                   "number nor a name")
    return name, dtype, tuple(shape)


def parse_size(text: str):
    """``B=64`` -> ("B", 64): the example value a named size is traced with."""
    name, eq, value = text.partition("=")
    if not (eq and _NAME_RE.match(name.strip()) and value.strip().isdigit()):
        raise click.UsageError(f"malformed --size {text!r}: expected NAME=N, e.g. B=64")
    n = int(value)
    if n < 2:
        raise click.UsageError(f"--size {text!r}: a named size is traced with a value >= 2 "
                               "(sizes 0 and 1 are specialized)")
    return name.strip(), n


def example_sizes(specs: dict, given: dict) -> dict:
    """``{size name: example value}`` for the named sizes in ``specs``
    (``{arg: (dtype, shape)}``): ``given`` (``--size``) or distinct values
    from ``FIRST_EXAMPLE_SIZE`` that equal no fixed size of the arguments."""
    fixed = {d for _, shape in specs.values() for d in shape if isinstance(d, int)}
    names = [d for _, shape in specs.values() for d in shape if isinstance(d, str)]
    unknown = set(given) - set(names)
    if unknown:
        raise click.UsageError(f"--size {sorted(unknown)[0]}: no --arg has a size of that name")
    out = dict(given)
    taken = fixed | set(given.values())
    n = FIRST_EXAMPLE_SIZE
    for name in names:
        if name not in out:
            while n in taken:
                n += 1
            out[name] = n
            taken.add(n)
    if len(set(out.values())) != len(out):
        raise click.UsageError("--size: distinct named sizes need distinct example values "
                               f"(got {', '.join(f'{k}={v}' for k, v in out.items())})")
    return out


def load_function(target: str):
    """``FILE.py:FUNC`` -> the function object (the file is imported)."""
    if ":" not in target:
        raise click.UsageError(f"expected FILE.py:FUNC, got {target!r}")
    path, _, name = target.rpartition(":")
    if not os.path.isfile(path):
        raise click.ClickException(f"no such file: {path}")
    _alias_torch_for(path)
    spec = importlib.util.spec_from_file_location("_tracec_user_" + re.sub(r"\W", "_", path),
                                                  path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise click.ClickException(f"importing {path} failed: {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
    fn = getattr(module, name, None)
    if fn is None:
        raise click.ClickException(f"{path} has no function {name!r}")
    if isinstance(fn, tracec.compiler.OptimizedModule):   # torch.compile(model)
        fn = fn._orig_mod
    if isinstance(fn, tracec.compiler.CompiledFunction):
        fn = fn.fn
    if not callable(fn):
        raise click.ClickException(f"{path}:{name} is not a function")
    return fn


_IMPORTS_TORCH = re.compile(r"^\s*(?:import|from)\s+torch(?:vision)?\b", re.M)


def _alias_torch_for(path: str) -> None:
    """A PyTorch-style file (one that imports ``torch`` or ``torchvision``)
    gets tracec for those names, as under ``tracec run``, until the command
    ends (the alias is removed when click closes the command's context)."""
    from tracec import as_torch
    try:
        with open(path, encoding="utf-8") as f:
            if not _IMPORTS_TORCH.search(f.read()):
                return
    except (OSError, UnicodeDecodeError):
        return      # importing it reports the problem
    if as_torch.installed():
        return
    try:
        as_torch.install_as_torch()
    except RuntimeError as e:
        raise click.ClickException(f"{path} imports torch: {e}") from None
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(as_torch.uninstall_as_torch)


def example_args(fn, arg_specs, size_specs=()):
    """Tensors for the function's parameters, by name: floats ~ N(0, 1)
    (seeded), integers and bools zero.  A named size takes its example
    value (``example_sizes``) and is marked dynamic under its name
    (``tracec.mark_dynamic``): the trace is symbolic in it."""
    return _example_args(fn, arg_specs, size_specs)[0]


def _example_args(fn, arg_specs, size_specs=()):
    """``(args, {arg name: dims})`` (``example_args``; ``dims``: each
    dimension's size name, or None for a fixed size)."""
    specs = {}
    for text in arg_specs:
        name, dtype, shape = parse_arg(text)
        specs[name] = (dtype, shape)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unknown = set(specs) - {p.name for p in params}
    if unknown:
        raise click.UsageError(f"--arg {sorted(unknown)[0]!r} is not a parameter of "
                               f"{fn.__name__}({', '.join(p.name for p in params)})")
    sizes = example_sizes(specs, dict(parse_size(t) for t in size_specs))
    args, dim_names = [], {}
    gen = tracec.Generator().manual_seed(0)
    for p in params:
        if p.name not in specs:
            if p.default is inspect.Parameter.empty:
                raise click.UsageError(f"missing --arg {p.name}=DTYPE[SHAPE] for {fn.__name__}")
            break
        dtype, named = specs[p.name]
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in named)
        if dtype.is_floating_point:
            args.append(tracec.randn(shape, dtype=dtype, generator=gen))
        else:
            args.append(tracec.zeros(shape, dtype=dtype))
        for d, n in enumerate(named):
            if isinstance(n, str):
                tracec.mark_dynamic(args[-1], d, n)
        if any(isinstance(n, str) for n in named):
            dim_names[p.name] = tuple(n if isinstance(n, str) else None for n in named)
    return args, dim_names


@click.group()
@click.version_option(tracec.version.__version__, prog_name="tracec")
def main():
    """tracec: PyTorch-style eager tensors, compiled."""


@main.command()
@click.argument("target")
@click.option("--arg", "arg_specs", multiple=True, help="NAME=DTYPE[SHAPE], e.g. x=f32[8,4]")
@click.option("--stage", default="optimized", show_default=True,
              type=click.Choice(list(STAGES) + ["ptx"]))
@click.option("--backend", default=None, help="backend (default: the platform's)")
@click.option("--format", "fmt", default="text", show_default=True,
              type=click.Choice(["text", "dot", "html"]),
              help="text: the IR; dot: a Graphviz graph of it (kernels as clusters); "
                   "html: that graph as one self-contained page (needs Graphviz's dot)")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="write to this file instead of standard output")
def dump(target, arg_specs, stage, backend, fmt, output):
    """Print one IR stage of FILE.py:FUNC traced on example arguments."""
    fn = load_function(target)
    args = example_args(fn, arg_specs)
    if fmt != "text" and stage not in ("trace", "autodiff", "optimized"):
        raise click.UsageError(f"--format {fmt} draws the tracec IR stages (trace, autodiff, "
                               f"optimized), not {stage!r}")
    if stage in ("trace", "autodiff", "optimized"):
        backend = backend or "interp"
    try:
        cf = tracec.compiler.CompiledFunction(fn, backend=backend, values_only=True)
        cf(*args)
        if fmt == "text":
            text = cf.ir(stage)
        else:
            from tracec import graphview
            module = cf._stage(cf._last, stage)
            title = f"{fn.__name__} ({stage})"
            text = (graphview.to_dot(module, title) if fmt == "dot"
                    else graphview.to_html(module, title))
        if output is None:
            click.echo(text, nl=False)
        else:
            with open(output, "w") as f:
                f.write(text)
    except click.ClickException:
        raise
    except tracec.TraceError as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:
        raise click.ClickException(f"{type(e).__name__}: {e}") from None


@main.command()
@click.argument("target")
@click.option("--arg", "arg_specs", multiple=True, help="NAME=DTYPE[SHAPE], e.g. x=f32[8,784]")
@click.option("--backend", default="interp", show_default=True,
              help="backend the calls run on (the kernels are the passes', whichever)")
def explain(target, arg_specs, backend):
    """Explain FILE.py:FUNC compiled: traces, guards, kernels, fusion, traffic."""
    from tracec.explain import explain as run_explain
    fn = load_function(target)
    args = example_args(fn, arg_specs)
    try:
        run_explain(fn, args, backend=backend, echo=click.echo)
    except tracec.TraceError as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:
        raise click.ClickException(f"{type(e).__name__}: {e}") from None


@main.command()
@click.argument("target")
@click.option("--arg", "arg_specs", multiple=True,
              help="NAME=DTYPE[SHAPE], e.g. x=f32[64,784]; a named size (x=f32[B,784]) "
                   "is an int64_t argument of the C function: the library serves every B")
@click.option("--size", "size_specs", multiple=True,
              help="NAME=N: the value a named size is traced with (default 23, 24...)")
@click.option("-o", "--output", required=True, help="the shared library to write (lib*.so)")
@click.option("--target", "cpu_target", default="native", show_default=True,
              type=click.Choice(TARGET_NAMES),
              help="the CPU to generate code for: this host's, or a portable x86-64 level")
@click.option("--weights", default=None, type=click.Path(dir_okay=False),
              help="a checkpoint (tracec.save, torch.save or .safetensors; a state dict, "
                   "or a training checkpoint holding one) whose values the library's "
                   "init_state writes (default: the values at build time)")
def build(target, arg_specs, size_specs, output, cpu_target, weights):
    """Compile FILE.py:FUNC ahead of time into a shared library + C header."""
    from tracec.aot import BuildError, build_library
    fn = load_function(target)
    args, dim_names = _example_args(fn, arg_specs, size_specs)
    names = [p.name for p in inspect.signature(fn).parameters.values()]
    if weights is not None and not os.path.isfile(weights):
        raise click.ClickException(f"no such file: {weights}")
    try:
        info = build_library(fn, args, names, output, target=cpu_target, weights=weights,
                             dim_names=dim_names)
    except (BuildError, tracec.TraceError) as e:
        raise click.ClickException(str(e)) from None
    except Exception as e:
        raise click.ClickException(f"{type(e).__name__}: {e}") from None
    click.echo(f"wrote {info['library']} and {info['header']} (for {info['target'].split(' (')[0]}): "
               f"int {info['function']}(")
    for b in info["buffers"]:
        click.echo(f"    {b}")
    for n in info.get("sizes", ()):
        click.echo(f"    {n}: int64_t, a named size")
    click.echo(")")


@main.group()
def cache():
    """Inspect or clear the on-disk cache of compiled code."""


@cache.command("info")
def cache_info():
    """Where the cache is, how many entries, how big."""
    from tracec.backends.cache import DiskCache
    info = DiskCache().info()
    click.echo(f"cache folder: {info['path']}")
    click.echo(f"entries:      {info['entries']}")
    click.echo(f"size:         {info['bytes'] / 1024:.1f} KiB")


@cache.command("clear")
def cache_clear():
    """Delete every cached entry."""
    from tracec.backends.cache import DiskCache
    n = DiskCache().clear()
    click.echo(f"removed {n} cache entr{'y' if n == 1 else 'ies'}")


@main.command()
@click.option("--epochs", default=None, type=int, help="epochs per mode")
@click.option("--backend", default=None, help="compiled backend (default: the platform's)")
@click.option("--dump-dir", default=None, help="where to dump the compiled step's IR")
def demo(epochs, backend, dump_dir):
    """Train an MLP on the shipped digits, eagerly then compiled."""
    from tracec.demo import run_demo
    try:
        run_demo(epochs=epochs, backend=backend, dump_dir=dump_dir, echo=click.echo)
    except tracec.TraceError as e:
        raise click.ClickException(str(e)) from None


@main.command(context_settings={"ignore_unknown_options": True,
                                "allow_interspersed_args": False})
@click.option("-m", "--module", "as_module", is_flag=True,
              help="SCRIPT is a module name: run it as `python -m MODULE [ARGS...]` does "
                   "(a package runs its __main__; `-m torch.distributed.run` is torchrun)")
@click.argument("script")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def run(as_module, script, script_args):
    """Run a PyTorch SCRIPT on tracec (``import torch`` gives tracec), as
    ``python SCRIPT [ARGS...]`` would: ``__main__``, ``sys.argv``, ``__file__``;
    with ``-m``, as ``python -m MODULE [ARGS...]`` would.  Options after
    SCRIPT are the script's (``tracec run train.py -m x`` passes ``-m x``)."""
    if not as_module and not os.path.isfile(script):
        raise click.ClickException(f"no such file: {script}")
    _install_for_program()
    if as_module:
        _run_module_main(script, script_args)
        return
    sys.argv = [script, *script_args]
    path = os.path.abspath(script)
    sys.path.insert(0, os.path.dirname(path))
    try:
        _run_main(path)
    except Exception as e:
        # The script's own error: its traceback as python prints it, from
        # the script's first frame (not this command's), and exit status 1.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        sys.exit(1)


@main.command(context_settings={"ignore_unknown_options": True,
                                "allow_interspersed_args": False,
                                "help_option_names": []})
@click.argument("launcher_args", nargs=-1, type=click.UNPROCESSED)
def torchrun(launcher_args):
    """``torchrun [OPTIONS] SCRIPT [ARGS...]`` on tracec: the same as
    ``tracec run -m torch.distributed.run ...`` (single node: N processes
    each running SCRIPT on tracec with torchrun's environment; ``--help``
    lists torchrun's options)."""
    _install_for_program()
    from tracec.distributed.run import main as torchrun_main
    sys.argv = ["torchrun", *launcher_args]     # (as the torchrun console script's)
    torchrun_main(list(launcher_args))


def _install_for_program() -> None:
    """tracec as ``torch`` here and in every Python process the program starts."""
    from tracec.as_torch import children_import_tracec, install_as_torch
    try:
        install_as_torch()
    except RuntimeError as e:
        raise click.ClickException(str(e)) from None
    # (the Python processes the script starts import tracec as torch too)
    children_import_tracec()


def _run_module_main(name: str, args) -> None:
    """Run the module ``name`` as ``python -m name *args`` does (what python
    itself calls: ``runpy._run_module_as_main``): ``sys.argv[0]`` the
    module's file, the working folder first on ``sys.path``, a package's
    ``__main__``; a module not found is python's one-line error, exit 1.
    ``__main__`` is a fresh module (as python's, not this command's), which
    ``spawn``ed workers find by its file.  The program's own error prints
    its traceback as python prints it, from runpy's first frame, exit 1."""
    import builtins
    import runpy
    import types
    sys.argv = ["-m", *args]      # (python's argv while it looks the module up)
    sys.path.insert(0, os.getcwd())
    module = types.ModuleType("__main__")
    module.__dict__.update(__builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    runpy_file = runpy._run_module_as_main.__code__.co_filename
    try:
        runpy._run_module_as_main(name, alter_argv=True)
    except Exception as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != runpy_file:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb or e.__traceback__)
        sys.exit(1)
    finally:
        sys.modules["__main__"] = saved


def _run_main(path: str) -> None:
    """Run the file ``path`` (absolute) as ``__main__``, as ``python SCRIPT``
    does: ``__file__`` absolute (Python 3.9+) while ``sys.argv[0]`` stays
    as typed, which ``runpy.run_path`` cannot give (it sets argv[0] to the
    path it runs).  ``sys.modules["__main__"]`` is the script's module, so
    ``spawn``ed workers (DataLoader, multiprocessing) find it by its file."""
    import builtins
    import importlib.machinery
    import types
    with open(path, "rb") as f:
        # dont_inherit: the script gets no __future__ flags of this file
        # (its `annotations` would turn the script's annotations to strings)
        code = compile(f.read(), path, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __package__=None, __spec__=None,
                           __loader__=importlib.machinery.SourceFileLoader("__main__", path),
                           __builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)   # noqa: S102 - the user's script, as python runs it
    finally:
        sys.modules["__main__"] = saved


if __name__ == "__main__":
    main()
