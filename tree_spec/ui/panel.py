"""The notebooks' interactive panels share this base: sliders wired to a plain function.

Each panel module has a `*_report(...)`, a plain function (testable without a browser) returning a dict of
numbers, and a `*_panel()` that builds a `Panel` whose controls call that function on every change and show the
result as text and a plot. Tests drive a panel by setting `panel.controls[name].value` and reading `panel.result`.
Every control changes what the panel shows (tests/test_widgets.py and tests/test_browser.py check each one).
"""
from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import clear_output, display
from matplotlib.figure import Figure

FASTER, SLOWER = "#2166ac", "#b2182b"  # the blue and red ends of RdBu: told apart with any colour vision
SPEEDUP_CMAP = "RdBu"  # speedup maps: diverging, colour-blind-safe, centred on 1x with TwoSlopeNorm(vcenter=1)


class Panel(widgets.VBox):
    """Sliders, a text view and a plot; `compute(**slider values)` reruns on every change.

    controls: name -> slider (the keyword `compute` receives); result: the last `compute` output;
    html: the rendered text; plot: where `draw(result)` shows its figure; error: the exception of the
    last update, None when it worked (it is shown in the panel: a slider callback's exception would
    otherwise only reach the kernel's log, and the panel would look frozen). link(change, controls), if
    given, runs first on every change and may set other controls (e.g. sliders that write a text box);
    the panel then recomputes once, from the values as linked.

    Displayed, a panel is the live widget plus a static snapshot (`snapshot_html`: the control values,
    the text and the plot as an inline PNG) for viewers that cannot run widgets: an untrusted or not
    yet executed notebook in JupyterLab, GitHub, nbviewer.
    """

    def __init__(
        self,
        controls: dict[str, widgets.ValueWidget],
        compute: Callable[..., dict],
        render: Callable[[dict], str],
        draw: Callable[[dict], Figure] | None = None,
        link: Callable[[dict, dict[str, widgets.ValueWidget]], None] | None = None,
    ):
        self.controls, self._compute, self._render, self._draw = controls, compute, render, draw
        self._link, self._linking = link, False
        self.html, self.plot = widgets.HTML(), widgets.Output()
        self.result: dict = {}
        self.error: Exception | None = None
        super().__init__([widgets.VBox(list(controls.values())), self.html, self.plot])
        self.add_class("tree-spec-panel")  # how the browser test finds the panels
        for control in controls.values():
            control.observe(self.update, names="value")
        self.update()
        if self.error is not None:  # a panel that cannot show its defaults is a bug: fail the cell
            raise self.error

    def values(self) -> dict:
        """The controls' current values, by name (the keywords `compute` receives)."""
        return {name: c.value for name, c in self.controls.items()}

    def update(self, change: dict | None = None) -> None:
        """Recompute from the current slider values, re-render the text and redraw the plot.

        If compute, render or draw raises, the panel shows the error (and keeps the last plot) instead.
        """
        if self._linking:  # a control set by `link`: the update that called link recomputes once
            return
        if self._link is not None and change is not None:
            self._linking = True
            try:
                self._link(change, self.controls)
            finally:
                self._linking = False
        try:
            result = self._compute(**self.values())
            text = self._render(result)
            fig = self._draw(result) if self._draw is not None else None
        except Exception as error:  # noqa: BLE001 - shown to the learner, kept in self.error
            self.error = error
            self.html.value = (
                f'<b style="color:{SLOWER}">this setting failed: {html.escape(type(error).__name__)}: '
                f"{html.escape(str(error))}</b><br>(values: {html.escape(describe(self.values()))})"
            )
            return
        self.error, self.result, self.html.value = None, result, text
        if fig is not None:
            with self.plot:
                clear_output(wait=True)
                display(fig)
                plt.close(fig)

    def snapshot_html(self, dpi: int = 72) -> str:
        """The panel as static HTML: the control values, the rendered text and the plot (inline PNG)."""
        image = ""
        if self._draw is not None and self.error is None:
            fig = self._draw(self.result)
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
            plt.close(fig)
            image = f'<img src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}" alt="plot">'
        return (
            f'<div class="tree-spec-panel-snapshot"><p><i>Static snapshot (run the notebook for live sliders):</i> '
            f"{html.escape(describe(self.values()))}</p><div>{self.html.value}</div>{image}</div>"
        )

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The widget view, plus text/html and text/plain snapshots for viewers without live widgets."""
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"{type(self).__name__}: {describe(self.values())} (run the notebook for live sliders)"
        bundle["text/html"] = self.snapshot_html()
        return bundle


def describe(values: dict) -> str:
    """{"alpha": 0.8, "k": 4, "branching": ""} -> "alpha = 0.8, k = 4, branching = (none)" (floats with at most
    4 significant digits; an empty text box reads "(none)")."""
    shown = {name: "(none)" if value == "" else value for name, value in values.items()}
    return ", ".join(f"{name} = {value:.4g}" if isinstance(value, float) else f"{name} = {value}"
                     for name, value in shown.items())
def slider(description: str, value: float, lo: float, hi: float, step: float) -> widgets.ValueWidget:
    """An IntSlider (int value and step) or a FloatSlider, laid out like every panel's."""
    style = {"description_width": "170px"}
    layout = widgets.Layout(width="480px")
    if isinstance(step, int) and isinstance(value, int):
        return widgets.IntSlider(value, lo, hi, step, description=description, style=style, layout=layout)
    return widgets.FloatSlider(value, min=lo, max=hi, step=step, description=description, style=style, layout=layout,
                               readout_format=".2f")


def verdict(speedup: float, source: str = "model") -> str:
    """A panel's speedup as bold HTML, named by its source (a panel's figures come from a model), green when faster
    than plain decoding, red when slower."""
    if speedup >= 1:
        return f'{source}: <b style="color:{FASTER}">speedup {speedup:.2f}× — faster than plain decoding</b>'
    return f'{source}: <b style="color:{SLOWER}">speedup {speedup:.2f}× — SLOWER than plain decoding</b>'
