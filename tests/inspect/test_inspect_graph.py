"""Issue 15 item 3: ``tracec dump --format dot|html``: a graph of the IR with
kernels as clusters, rendered by Graphviz and shown in a real browser."""
import os
import re
import shutil
import subprocess

import pytest

import tracec
from tracec import graphview
from tracec.passes.fusion import count_kernels
from inspect_programs import batch, mlp_step
from program_runner import tracec_cli

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "inspect_programs.py")
ARGS = ["--arg", "x=f32[8,32]", "--arg", "y=i64[8]"]
DOT = shutil.which("dot")
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(b)), None)


@pytest.fixture(scope="module")
def optimized():
    step, model, opt = mlp_step("sgd")
    f = tracec.compile(step, backend="interp")
    for _ in range(2):
        f(*batch())
    return f._last.optimized()


def _dump(fmt, out):
    r = tracec_cli(["dump", PROGRAM + ":step", *ARGS, "--format", fmt, "-o", str(out)],
                   timeout=300)
    assert r.returncode == 0, r.stderr
    return out.read_text()


def test_dot_has_kernels_as_clusters_and_named_arguments(optimized):
    text = graphview.to_dot(optimized, "step")
    assert text.count("subgraph cluster_k") == count_kernels(optimized) > 0
    assert '"model.0.weight\\nf32[16,32]"' in text
    assert re.search(r'label="matmul\\nf32\[8,16\]\\ninspect_programs.py:\d+"', text)
    assert re.search(r'-> n\d+ \[label="f32\[8,16\]"\]', text)    # edges carry shapes


@pytest.mark.skipif(DOT is None, reason="Graphviz's dot is not installed "
                                         "(scripts/install-system-tools.sh)")
def test_dot_from_the_cli_renders_with_graphviz(tmp_path):
    text = _dump("dot", tmp_path / "step.dot")
    r = subprocess.run([DOT, "-Tsvg", str(tmp_path / "step.dot")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('class="cluster"') == text.count("subgraph cluster_k") > 0


@pytest.mark.skipif(DOT is None, reason="Graphviz's dot is not installed")
def test_html_page_is_self_contained(tmp_path):
    page = _dump("html", tmp_path / "step.html")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert not re.search(r'(src|href)="(https?:)?//', page)   # nothing from the network
    assert "<link" not in page


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium "
                                             "(scripts/install-system-tools.sh)")
def test_html_page_shows_the_kernels_in_a_real_browser(tmp_path):
    page = tmp_path / "step.html"
    text = _dump("html", page)
    kernels = int(re.search(r'data-kernels="(\d+)"', text).group(1))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}"]
    r = subprocess.run([BROWSER, *flags, "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    # The DOM after the page's script ran: it counted the kernel clusters.
    assert f'data-rendered-kernels="{kernels}"' in r.stdout
    assert r.stdout.count('class="cluster"') == kernels > 0
    assert "kernel 1: fused" in r.stdout
    shot = tmp_path / "step.png"
    subprocess.run([BROWSER, *flags, "--window-size=1400,1000", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("TRACEC_SCREENSHOT"):     # keep it for a person to look at
        shutil.copy(shot, os.environ["TRACEC_SCREENSHOT"])
