"""References recorded on a GPU differ from a CPU learner's outputs by float32 rounding only: the tolerances
must absorb that, and still fail every shipped wrong file.

No GPU is needed: every floating tensor of every recorded output (expected and modelled mistakes) is
perturbed by Gaussian noise of GPU size, then `check` runs against the perturbed references.
  - real-model outputs (logits): sigma = 1e-5 x the tensor's max |value|. A GPU's float32 matmuls sum in
    another order than the CPU's (TF32 off, as the worker sets it): ~1e-6-1e-5 relative to the row scale
    for this model's widths, so this is at the generous end; the largest of ~10^5 draws is ~4.5 sigma,
    below the 1e-3 atol + 1e-3 rtol of exercises 9-10.
  - the other exercises (elementwise ops and short sums, correctly rounded on both devices):
    sigma = 2 ulp = 2.4e-7 x |value|.
  - integer-valued tensors (sample counts) are exact on every device and stay as they are.
"""
import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from practice.judgekit import cli, references
from practice.judgekit.catalog import discover
from practice.judgekit.settings import PRACTICE, REPO, Settings

MODEL_SIGMA, ULP_SIGMA = 1e-5, 2 * 2.0 ** -23


def perturbed(value, sigma_of, generator):
    """value with N(0, sigma_of(t)^2) noise added to every non-integer float tensor inside it -> (value, n tensors)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool((value == value.round()).all()):
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64, device="cpu") * sigma_of(value)
        return (value.double() + noise).to(value.dtype), 1
    if isinstance(value, (list, tuple)):
        parts = [perturbed(v, sigma_of, generator) for v in value]
        return type(value)(p[0] for p in parts), sum(p[1] for p in parts)
    if isinstance(value, dict):
        parts = {k: perturbed(v, sigma_of, generator) for k, v in value.items()}
        return {k: p[0] for k, p in parts.items()}, sum(p[1] for p in parts.values())
    return value, 0


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    model = Path(os.environ.get("SPEC_JUDGE_MODEL") or REPO / "models" / "tiny-qwen3")
    if not model.is_dir():
        pytest.skip(f"model {model} missing")
    root = tmp_path_factory.mktemp("gpu-noise")
    shutil.copytree(model, root / "model")
    shutil.copytree(PRACTICE / "references", root / "references")
    generator = torch.Generator().manual_seed(0)
    touched = []
    for ex in discover(PRACTICE / "exercises"):
        data = references.load_data(root / "references", ex.name)
        if ex.needs_model:
            sigma_of = lambda t: MODEL_SIGMA * float(t.abs().max().clamp_min(1e-30))  # noqa: E731
        else:
            sigma_of = lambda t: ULP_SIGMA * t.double().abs()  # noqa: E731
        data, n = perturbed(data, sigma_of, generator)
        if n:
            meta = references.load_meta(root / "references", ex.name)
            references.save(root / "references", ex.name, {k: v for k, v in meta.items() if k != "data_sha256"}, data)
            touched.append(ex)
    return root, touched


def test_perturbation_reaches_the_float_exercises(noisy):
    root, touched = noisy
    names = {ex.name for ex in touched}
    assert {"05-residual", "09-compact-path", "10-tree-forward"} <= names, names
    original = references.load_data(PRACTICE / "references", "10-tree-forward")["expected"]
    changed = references.load_data(root / "references", "10-tree-forward")["expected"]
    logits = [k for k in original if isinstance(original[k], torch.Tensor)]  # the meta case records no values
    diff = max(float((changed[k] - original[k]).abs().max()) for k in logits)
    # inside exercise 10's tolerance everywhere (atol 1e-3 + rtol 1e-3 x |logit|): the noise moves, never fails
    inside = all(bool(((changed[k] - original[k]).abs() <= 1e-3 + 1e-3 * original[k].abs()).all()) for k in logits)
    assert diff > 0 and inside, diff


def test_correct_cpu_outputs_pass_and_wrong_files_fail_against_gpu_noisy_references(noisy):
    root, touched = noisy
    settings = Settings(references=root / "references", workspace=root / "workspace", model=str(root / "model"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.cmd_check(settings, touched)
    assert code == 0, out.getvalue()
    assert all(json.loads((root / "references" / f"{ex.name}.json").read_text())["data_sha256"] for ex in touched)
