"""A picture of a traced function: Graphviz DOT, and a self-contained HTML page.

``to_dot(module)`` draws the function of a tracec module (any IR stage
before lowering): each function argument is an ellipse labelled with its
user name (``tracec.ir.names``) and type; each op a box labelled with the
op, its result shape and the user's ``file:line``; each ``tracec.kernel``
a cluster (``kernel N: fused add+relu``) holding the ops fused into it;
each result a node named as the function names it.  Edges carry the
tensor type flowing along them.  Constants are left out (they would
outnumber everything else).  Every node and cluster has a tooltip with
the full op text (operand and result types, location).

``to_html(module)`` renders the DOT to SVG with Graphviz's ``dot`` (the
``graphviz`` package runs it) and inlines it in one HTML file with a few
lines of CSS and JS: hovering a node shows its details; nothing is loaded
from the network.

Invariant: the DOT text parses with ``dot``; node ids are stable for a
given module (numbered in walk order), so two dumps of one trace match.
"""
from __future__ import annotations

import html
import re

from xdsl.dialects import func
from xdsl.ir import BlockArgument

from tracec import ir
from tracec.ir.summary import op_label

__all__ = ["to_dot", "to_html", "render_svg", "kernel_count"]


def _function(module):
    fn = next((op for op in module.ops if isinstance(op, func.FuncOp)), None)
    if fn is None:
        raise ValueError("the module holds no function to draw")
    return fn


def _loc(op) -> str:
    t = ir.loc_tuple(op)
    return f"{t[0].rsplit('/', 1)[-1]}:{t[1]}" if t else ""


def _describe(op) -> str:
    ins = ", ".join(ir.format_type(t) for t in op.operand_types)
    outs = ", ".join(ir.format_type(t) for t in op.result_types)
    return f"{op.name} ({ins}) -> {outs} at {ir.format_loc(op)}"


def _q(s: str) -> str:
    """A DOT double-quoted string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def kernel_count(module) -> int:
    """How many ``tracec.kernel`` ops the module's function holds."""
    return sum(1 for op in _function(module).body.block.ops if isinstance(op, ir.KernelOp))


class _Graph:
    def __init__(self, fn):
        self.fn = fn
        self.lines: list[str] = []
        self.node_of: dict = {}     # SSA value -> node id producing it
        self.ids = 0

    def node(self, label: str, tooltip: str, indent: str = "  ", **attrs) -> str:
        self.ids += 1
        nid = f"n{self.ids}"
        extra = "".join(f", {k}={_q(v)}" for k, v in attrs.items())
        self.lines.append(f"{indent}{nid} [label={_q(label)}, tooltip={_q(tooltip)}{extra}];")
        return nid

    def source(self, v):
        """The node producing ``v``: kernel arguments resolve to the kernel's
        operands, kernel results to the op yielding them."""
        while True:
            if isinstance(v, BlockArgument):
                parent = v.block.parent_op()
                if isinstance(parent, ir.KernelOp):
                    v = parent.operands[v.index]
                    continue
                return self.node_of.get(v)
            op = v.owner
            if isinstance(op, ir.KernelOp):
                v = op.body.block.last_op.operands[v.index]
                continue
            return self.node_of.get(v)

    def edges(self, op, target: str) -> None:
        for v in op.operands:
            src = self.source(v)
            if src is not None:
                self.lines.append(f"  {src} -> {target} [label={_q(ir.format_type(v.type))}];")

    def op_node(self, op, indent: str) -> str:
        shape = ", ".join(ir.format_type(t) for t in op.result_types)
        label = f"{op_label(op)}\n{shape}" + (f"\n{_loc(op)}" if _loc(op) else "")
        nid = self.node(label, _describe(op), indent, shape="box", style="rounded,filled",
                        fillcolor="#f4f4f4")
        for r in op.results:
            self.node_of[r] = nid
        return nid


def to_dot(module, title: str | None = None) -> str:
    """DOT text of the module's function (see the module docstring)."""
    fn = _function(module)
    g = _Graph(fn)
    name = title or fn.sym_name.data
    g.lines += ["digraph tracec {", f"  label={_q(name)}; labelloc=t; fontname=Helvetica;",
                "  node [fontname=Helvetica, fontsize=10];",
                "  edge [fontname=Helvetica, fontsize=8, color=\"#555555\"];"]
    for i, a in enumerate(fn.body.block.args):
        label = ir.arg_name(a) or f"arg{i}"
        g.node_of[a] = g.node(f"{label}\n{ir.format_type(a.type)}",
                              f"argument {i}: {label}: {ir.format_type(a.type)}",
                              shape="ellipse", style="filled", fillcolor="#dbeafe")
    pending = []     # (op, node) whose edges are drawn once every producer has a node
    k = 0
    for op in fn.body.block.ops:
        if isinstance(op, (ir.ConstantOp, func.ReturnOp)):
            continue
        if isinstance(op, ir.KernelOp):
            k += 1
            inner = [o for o in op.body.block.ops
                     if not isinstance(o, (ir.ConstantOp, ir.YieldOp))]
            g.lines += [f"  subgraph cluster_k{k} {{",
                        f"    label={_q(f'kernel {k}: {op_label(op)}')};",
                        f"    tooltip={_q(_describe(op))};",
                        "    style=\"rounded,filled\"; fillcolor=\"#fff7e6\"; color=\"#d08700\";"]
            for o in inner:
                pending.append((o, g.op_node(o, "    ")))
            g.lines.append("  }")
            continue
        pending.append((op, g.op_node(op, "  ")))
    names = ir.result_names(fn)
    ret = fn.body.block.last_op
    for i, v in enumerate(ret.operands):
        label = names[i] or f"result {i}"
        nid = g.node(f"{label}\n{ir.format_type(v.type)}", f"result {i}: {label}",
                     shape="octagon", style="filled", fillcolor="#dcfce7")
        src = g.source(v)
        if src is not None:
            g.lines.append(f"  {src} -> {nid} [label={_q(ir.format_type(v.type))}];")
    for op, nid in pending:
        g.edges(op, nid)
    g.lines.append("}")
    return "\n".join(g.lines) + "\n"


def render_svg(dot_text: str) -> str:
    """SVG text of DOT, rendered by Graphviz's ``dot`` program."""
    import graphviz
    try:
        svg = graphviz.Source(dot_text).pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise RuntimeError("Graphviz's `dot` program is not installed: run "
                           "scripts/install-system-tools.sh (Debian package graphviz)") from None
    # Inline SVG needs neither the XML prolog nor the DOCTYPE.
    return re.sub(r"^.*?(?=<svg)", "", svg, flags=re.S)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1em; }}
#details {{ position: sticky; top: 0; background: #fffbe6; border: 1px solid #d08700;
           padding: .4em .6em; font-family: monospace; white-space: pre-wrap; z-index: 1; }}
#graph svg {{ max-width: 100%; height: auto; }}
g.node:hover polygon, g.node:hover ellipse, g.node:hover path {{ stroke: #d00; stroke-width: 2; }}
</style></head>
<body data-kernels="{kernels}">
<h1>{title}</h1>
<p id="summary">{kernels} kernels, {ops} ops, {args} arguments, {results} results.
Hover a node or a kernel for its details.</p>
<div id="details">hover a node</div>
<div id="graph">{svg}</div>
<script>
(function () {{
  var details = document.getElementById("details");
  function text(el) {{
    var a = el.querySelector("a");
    var t = a && (a.getAttribute("xlink:title") || a.getAttribute("title"));
    if (!t) {{ var ti = el.querySelector("title"); t = ti ? ti.textContent : ""; }}
    return t;
  }}
  document.querySelectorAll("g.node, g.cluster").forEach(function (el) {{
    el.addEventListener("mouseenter", function () {{ details.textContent = text(el); }});
  }});
  var n = document.querySelectorAll("g.cluster").length;
  document.getElementById("summary").setAttribute("data-rendered-kernels", String(n));
}})();
</script>
</body></html>
"""


def to_html(module, title: str | None = None) -> str:
    """One self-contained HTML page showing the module's graph as SVG."""
    fn = _function(module)
    name = title or fn.sym_name.data
    svg = render_svg(to_dot(module, name))
    ops = sum(1 for op in fn.body.block.walk()
              if not isinstance(op, (ir.ConstantOp, ir.YieldOp, ir.KernelOp, func.ReturnOp,
                                     func.FuncOp)))
    return _PAGE.format(title=html.escape(f"tracec: {name}"), kernels=kernel_count(module),
                        ops=ops, args=len(fn.body.block.args),
                        results=len(fn.function_type.outputs.data), svg=svg)
