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
