"""The pictures of notebooks 00-01 (tree_spec.ui.figures_basics) draw from real inputs and refuse bad ones."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tree_spec.analysis.timeline import record_plain, record_speculative  # noqa: E402
from tree_spec.ui.figures_basics import draw_timelines, draw_truncate, draw_verify_rows  # noqa: E402


def texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


@pytest.mark.parametrize("n_accepted", [0, 2, 4])
def test_verify_rows_label_every_row(n_accepted):
    fig = draw_verify_rows("a", ["b", "c", "d", "e"], ["b", "c", "x", "y", "z"], n_accepted)
    rows = [t for t in texts(fig) if t.startswith("row ")]
    assert len(rows) == 5 and sum("accept" in t for t in rows) == n_accepted
    assert any("bonus" in t for t in rows) == (n_accepted == 4)
    assert any("correction" in t for t in rows) == (n_accepted < 4)
    plt.close(fig)


def test_verify_rows_refuse_a_wrong_row_count():
    with pytest.raises(ValueError):
        draw_verify_rows("a", ["b", "c"], ["b", "c"], 1)


def test_truncate_marks_the_new_length():
    fig = draw_truncate(["r", "d1", "d2", "d3"], start=10, n_accepted=1)
    assert "length 14" in texts(fig) and "length 12" in texts(fig)
    with pytest.raises(ValueError):
        draw_truncate(["r", "d1"], start=3, n_accepted=2)
    plt.close(fig)


def test_timelines_one_panel_per_run(tiny_checkpoint):
    from mini_llm import Transformer

    model = Transformer.from_pretrained(tiny_checkpoint)
    plain = record_plain(model, [1, 2, 3, 1, 2], 6)
    runs = [record_speculative(model, model, [1, 2, 3, 1, 2], 6, k=k) for k in (1, 2)]
    fig = draw_timelines(plain, runs, n_tokens=4)
    assert len(fig.axes) == 2
    plt.close(fig)
