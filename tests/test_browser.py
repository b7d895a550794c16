"""The panels in a real browser: JupyterLab on 127.0.0.1, headless Chromium, real mouse events.

A notebook showing every kind of panel (speedup, tree, batch, live tree viewer) is executed with
nbclient and opened in JupyterLab as a learner's fresh clone would be: untrusted, the kernel not yet
run. Each panel must show its static snapshot (text and plot) there. Then the notebook runs in the
browser; each panel must render as live controls, and every control of every panel, worked as a
learner would (sliders dragged with the mouse, the text box typed into, dropdowns switched), must change
the panel's text and its plot. Needs Debian's `chromium` (`.ci/run` installs it) and the Python
`playwright` package (its own browser download is not used); skipped without them.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
PANELS = 4
CELLS = [
    "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path.cwd().resolve().parent))\n"
    "from mini_llm import load_model, load_tokenizer\n"
    "from tree_spec.ui.batch_panel import batch_panel\nfrom tree_spec.ui.chain_panel import speedup_panel\n"
    "from tree_spec.ui.tree_panel import tree_panel\nfrom tree_spec.ui.tree_viewer import tree_viewer_panel",
    "speedup_panel()",
    "tree_panel()",
    "batch_panel()",
    'target, tok = load_model("tiny-qwen3"), load_tokenizer("tiny-qwen3")\n'
    'tree_viewer_panel(target, target, tok, {"main": tok.encode("def main():\\n    return"),\n'
    '                                        "add": tok.encode("def add(a, b):\\n    return")}, max_step=6)',
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(base URL, token, root folder) of a JupyterLab serving a copy of the repo with the panels notebook."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (apt-get install chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (requirements.txt)")
    root = tmp_path_factory.mktemp("lab")
    for entry in ("mini_llm", "tree_spec", "models", "practice"):
        (root / entry).symlink_to(REPO / entry)
    (root / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")  # as JupyterLab will write it: opening stays unmodified
    nb.metadata.kernelspec = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    path = root / "notebooks" / "panels.ipynb"
    nbformat.write(nb, path)
    from nbclient import NotebookClient

    executed = nbformat.read(path, as_version=4)

    NotebookClient(executed, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(root / "notebooks")}}).execute()
    nbformat.write(executed, path)  # executed by nbclient, not signed: JupyterLab opens it untrusted

    port, token = free_port(), "browser-test"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(root / ".runtime"), JUPYTERLAB_WORKSPACES_DIR=str(root / ".ws"),
               JUPYTERLAB_SETTINGS_DIR=str(root / ".settings"))
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True", "--allow-root",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(root / "lab.log", "w"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise RuntimeError(f"JupyterLab did not start:\n{(root / 'lab.log').read_text()[-3000:]}")
                time.sleep(1)
        yield base, token, root
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()


def panel_state(page, i: int) -> dict:
    """Text and plot (image source) of the i-th live panel."""
    return page.evaluate(
        """i => { const p = document.querySelectorAll('.tree-spec-panel')[i];
                  const html = p.querySelector('.widget-html-content');
                  const img = p.querySelector('.jp-OutputArea-output img');
                  return {text: html ? html.innerText : null, plot: img ? img.src : null,
                          sliders: p.querySelectorAll('.noUi-handle').length}; }""",
        i,
    )


CONTROLS = ".widget-slider, .widget-text, .widget-dropdown"  # every kind of control the panels use
TYPED = "3,2,1"  # what the test types into a text box


def settled_state(page, i: int, quiet_s: float = 0.6, timeout_s: float = 60) -> dict:
    """The i-th panel's state once the kernel is idle and text and plot stayed the same for quiet_s."""
    deadline, last, since = time.time() + timeout_s, None, time.time()
    while time.time() < deadline:
        idle = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'")
        state = panel_state(page, i)
        if state != last or not idle:
            last, since = state, time.time()
        elif time.time() - since >= quiet_s:
            return state
        time.sleep(0.15)
    raise AssertionError(f"panel {i} did not settle: {last}")


def work_control(page, control) -> str:
    """Change one control as a learner would; returns what was done (for the failure message)."""
    control.scroll_into_view_if_needed()
    kind = control.get_attribute("class")
    if "widget-slider" in kind:
        handle, track = control.locator(".noUi-handle").first, control.locator(".noUi-target").first
        box, bar = handle.bounding_box(), track.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        dx = -70 if x > bar["x"] + bar["width"] / 2 else 70  # towards the middle: never stuck at an end
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + dx, y, steps=5)
        page.mouse.up()
        return f"dragged the slider {dx:+d} px"
    if "widget-text" in kind:
        field = control.locator("input").first
        field.fill(TYPED)
        field.press("Enter")
        return f"typed {TYPED!r}"
    select = control.locator("select").first
    current = select.evaluate("s => s.selectedIndex")
    other = next(k for k in range(select.locator("option").count()) if k != current)
    select.select_option(index=other)
    return f"chose option {other} of the dropdown (was {current})"


def test_panels_show_a_snapshot_untrusted_then_respond_to_the_mouse_when_run(lab):
    started = time.time()
    from playwright.sync_api import sync_playwright

    base, token, root = lab
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/notebooks/panels.ipynb?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_function(
                "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                " && window.jupyterapp.shell.currentWidget.context && window.jupyterapp.shell.currentWidget.context.isReady",
                timeout=60_000)

            # 1. as opened from a fresh clone: a snapshot with text and plot per panel, no object repr
            page.wait_for_function(  # the cells render one after another: wait for all of them
                f"() => document.querySelectorAll('.tree-spec-panel-snapshot img').length === {PANELS}", timeout=60_000)
            snapshots = page.evaluate(
                """() => [...document.querySelectorAll('.tree-spec-panel-snapshot')].map(s =>
                       ({text: s.innerText, image: !!s.querySelector('img[src^="data:image/png"]')}))""")
            assert len(snapshots) == PANELS, snapshots
            assert all(s["image"] and "Static snapshot" in s["text"] for s in snapshots), snapshots
            assert "Panel(children" not in page.inner_text(".jp-Notebook")
            assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty") is False

            # 2. run it in the browser: every panel becomes live controls
            page.wait_for_function(
                "() => { const s = window.jupyterapp.shell.currentWidget.sessionContext;"
                " return s.session && s.session.kernel && s.session.kernel.status === 'idle'; }", timeout=120_000)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function(
                f"() => document.querySelectorAll('.tree-spec-panel').length === {PANELS}"
                " && [...document.querySelectorAll('.tree-spec-panel')].every(p =>"
                " p.querySelector('.noUi-handle') && p.querySelector('.jp-OutputArea-output img'))",
                timeout=240_000)
            errors = page.evaluate("() => document.querySelectorAll('.jp-OutputArea-output[data-mime-type="
                                   "\"application/vnd.jupyter.stderr\"]').length")
            assert errors == 0, page.inner_text(".jp-Notebook")[-3000:]

            # 3. work every control of every panel as a learner would: the panel's text and plot change
            worked = 0
            for i in range(PANELS):
                controls = page.locator(".tree-spec-panel").nth(i).locator(CONTROLS)
                assert controls.count() >= 3, f"panel {i}: {controls.count()} controls"
                for j in range(controls.count()):
                    before = settled_state(page, i)
                    assert before["sliders"] >= 1 and before["text"] and before["plot"], before
                    done = work_control(page, controls.nth(j))
                    try:
                        page.wait_for_function(
                            """([i, text, plot]) => { const p = document.querySelectorAll('.tree-spec-panel')[i];
                                   const html = p.querySelector('.widget-html-content');
                                   const img = p.querySelector('.jp-OutputArea-output img');
                                   return html && img && html.innerText !== text && img.src !== plot; }""",
                            arg=[i, before["text"], before["plot"]], timeout=60_000)
                    except Exception as error:
                        raise AssertionError(f"panel {i}, control {j}: {done}, but text and plot did not both change:"
                                             f" {panel_state(page, i)['text']}") from error
                    assert "this setting failed" not in panel_state(page, i)["text"], (i, j, done)
                    worked += 1
            assert worked == 3 + 8 + 4 + 4  # chain, tree, batch, viewer: every control
            print(f"{worked} controls worked in {time.time() - started:.0f} s after the lab started")
        finally:
            browser.close()
