"""Shared fixtures: offline Hugging Face, random tiny Qwen3 checkpoints written in HF format."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One torch thread per process (the notebook kernels and CLI subprocesses the tests start inherit it).
# torch's OpenMP threads spin-wait at every parallel region; when another program holds one of two
# cores, each region waits a scheduler time slice, and a notebook-like workload ran 5-10x slower
# (scripts/busy_bench.py: default threads vs 1 thread, idle and with one core busy). Set
# OMP_NUM_THREADS yourself to override.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))  # also when torch was imported before this file
if os.environ.get("MINI_LLM_TEST_DEVICE"):  # scripts/gpu_check.sh runs the fast suite with CUDA as the default
    torch.set_default_device(os.environ["MINI_LLM_TEST_DEVICE"])

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives JupyterLab in headless Chromium (skipped without chromium)")


def pytest_collection_modifyitems(config, items):
    """Slow tests first (a stable partition): xdist then hands the long ones (notebooks, the model switch, the
    GPU-script dry run, minutes each) out first, and the many short ones fill both workers at the end, instead
    of one worker finishing a notebook alone while the other idles."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)

TARGET_DIR = REPO / "models" / "tiny-qwen3"
DRAFT_DIR = REPO / "models" / "tiny-qwen3-draft"

# Three random tiny configs covering the axes the parity criterion names:
# GQA ratio 1:1 / 2:1 / 4:1, head_dim == or != hidden/heads, tied or untied embeddings.
TINY_CONFIGS = {
    "gqa1_tied": dict(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, head_dim=16, tie_word_embeddings=True),
    "gqa2_headdim24_untied": dict(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=24, tie_word_embeddings=False),
    "gqa4_headdim16_tied": dict(vocab_size=89, hidden_size=96, intermediate_size=160, num_hidden_layers=3,
                                num_attention_heads=8, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True),
}


def make_hf_model(cfg_kwargs: dict, seed: int = 0):
    """A random transformers Qwen3ForCausalLM whose weights are large enough for peaked logits.

    transformers' default init (std 0.02) gives near-uniform logits, which would make a parity test
    weak; std 0.15 on matrices and norm weights around 1 give logits spread over several nats.
    """
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    with torch.device("cpu"):
        hf = Qwen3ForCausalLM(Qwen3Config(max_position_embeddings=512, rope_theta=10_000.0, **cfg_kwargs)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.15)
            else:
                p.uniform_(0.7, 1.3)
    return hf


@pytest.fixture(scope="session", params=sorted(TINY_CONFIGS))
def hf_checkpoint(request, tmp_path_factory):
    """(name, transformers model, folder with its HF checkpoint)."""
    hf = make_hf_model(TINY_CONFIGS[request.param])
    path = tmp_path_factory.mktemp(request.param)
    hf.save_pretrained(path)
    return request.param, hf, path


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """One random checkpoint (GQA 2:1, head_dim != hidden/heads, untied) for the non-parity tests."""
    hf = make_hf_model(TINY_CONFIGS["gqa2_headdim24_untied"], seed=1)
    path = tmp_path_factory.mktemp("tiny")
    hf.save_pretrained(path)
    return path
