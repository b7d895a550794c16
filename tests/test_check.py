"""tree_spec.analysis.check.compare: exact for tokens/masks (first differing index), max |Δ| against a bar for floats."""
import doctest

import torch

import tree_spec.analysis.check as check
from tree_spec.analysis.check import compare


def test_doctests_hold():
    with torch.device("cpu"):  # the examples build their tensors without a device
        failures, _ = doctest.testmod(check, extraglobs={"torch": torch})
    assert failures == 0


def test_tokens_exact_and_first_mismatch(capsys):
    assert compare("same", [1, 2, 3], torch.tensor([1, 2, 3], device="cpu"))
    assert not compare("diff", [1, 2, 3, 4], [1, 2, 9, 4])
    assert "index 2" in capsys.readouterr().out
    assert not compare("prefix", [1, 2], [1, 2, 3])
    assert "index 2" in capsys.readouterr().out


def test_masks_exact():
    mask = torch.tril(torch.ones(3, 3, dtype=torch.bool, device="cpu"))
    assert compare("mask", mask, mask.clone())
    assert not compare("mask", mask, mask.T)


def test_floats_against_bar(capsys):
    a = torch.tensor([0.1, 0.2], dtype=torch.float64, device="cpu")
    assert compare("floats", a, a + 1e-9, bar=1e-6)
    assert not compare("floats", a, a + 1e-3, bar=1e-6)
    assert not compare("floats exact", a, a + 1e-9)  # no bar: exact equality required
    assert compare("scalar", 3.0, 3.0)
    assert not compare("shape", a, torch.zeros(3, device="cpu"), bar=1.0)
    assert not compare("nan", torch.tensor([float("nan")], device="cpu"), torch.tensor([0.0], device="cpu"), bar=1.0)
    lines = [line for line in capsys.readouterr().out.splitlines()]
    assert all(line.startswith("check: ") for line in lines)


def test_verdict_is_said_in_words(capsys):
    """One verdict per line: identical, close (max |Δ|, bar) or MISMATCH; never yes/no columns."""
    a = torch.tensor([0.25, 0.75], dtype=torch.float64, device="cpu")
    assert compare("tokens", [5, 7, 9], [5, 7, 9])
    assert compare("same floats", a, a.clone(), bar=1e-6)
    assert compare("near floats", a, a + 1e-7, bar=1e-6)
    assert not compare("far floats", a, a + 1e-2, bar=1e-6)
    assert not compare("no bar", a, a + 1e-7)
    assert compare("one value", 0.5, 0.5)
    tokens, same, near, far, no_bar, one = capsys.readouterr().out.splitlines()
    assert tokens.endswith("identical (3 items)") and same.endswith("identical (2 items)")
    assert near.endswith("close (max |Δ| 1.0e-07, bar 1.0e-06)")
    assert "MISMATCH (max |Δ| 1.0e-02, over the bar 1.0e-06)" in far
    assert "MISMATCH" in no_bar and "exact equality" in no_bar
    assert one.endswith("identical")
    for line in (tokens, same, near, far, no_bar, one):
        assert " yes" not in line and " no " not in line.replace("no bar", "") and "exact no" not in line
