"""The corpus is deterministic, the tokenizer round-trips, and a short training run learns and loads."""
import json

import pytest
import torch

from mini_llm import Transformer, load_model
from mini_llm.corpus import build_corpus, read_texts, train_tokenizer
from mini_llm.train import main as train_main

from .conftest import DRAFT_DIR


def test_corpus_file_list_and_split_are_deterministic():
    a, b = build_corpus(), build_corpus()
    assert a.train_files == b.train_files and a.held_out_files == b.held_out_files
    assert a.train_files == sorted(a.train_files)
    assert not set(a.train_files) & set(a.held_out_files)
    assert 0.02 < len(a.held_out_files) / (len(a.train_files) + len(a.held_out_files)) < 0.08
    assert not any("site-packages" in p.parts for p in a.train_files)
    without_tests = build_corpus(include_tests=False)
    assert set(without_tests.held_out_files) <= set(a.held_out_files)  # split is per file, not per list


def test_tokenizer_round_trips_through_autotokenizer(tmp_path):
    from transformers import AutoTokenizer

    corpus = build_corpus(include_tests=False)
    train_tokenizer(read_texts(corpus.train_files[:40]), tmp_path, vocab_size=400)
    tok = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    for text in read_texts(corpus.held_out_files[:10]):
        assert tok.decode(tok.encode(text)) == text
    assert tok.eos_token == "<|endoftext|>"


@pytest.mark.slow
def test_short_training_run_lowers_loss_and_writes_a_loadable_checkpoint(tmp_path):
    if not (DRAFT_DIR / "tokenizer.json").exists():
        pytest.skip("needs the shipped tokenizer in models/tiny-qwen3-draft")
    out = tmp_path / "model"
    log = train_main(["--preset", "tiny", "--out", str(out), "--work", str(tmp_path / "work"), "--tokenizer",
                      str(DRAFT_DIR), "--max-files", "8", "--steps", "60", "--batch", "8", "--seq", "64",
                      "--eval-every", "30", "--eval-windows", "16", "--lr", "1e-2", "--warmup", "5"])
    first, last = log["train"][0]["loss"], log["eval"][-1]["loss"]
    assert last < first - 1.0, (first, last)  # from ~ln(4096) = 8.3 nats, 60 steps reliably gain > 1 nat
    model = load_model(out)
    assert isinstance(model, Transformer) and model.cfg.num_hidden_layers == 1
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen3"
    assert (out / "loss_curve.png").stat().st_size > 0
    resumed = train_main(["--preset", "tiny", "--out", str(out), "--work", str(tmp_path / "work"), "--tokenizer",
                          str(DRAFT_DIR), "--max-files", "8", "--steps", "70", "--batch", "8", "--seq", "64",
                          "--eval-every", "30", "--eval-windows", "16", "--lr", "1e-2", "--warmup", "5", "--resume"])
    assert resumed["eval"][-1]["step"] == 70 and len(resumed["eval"]) == len(log["eval"]) + 1
    with torch.no_grad():
        assert torch.isfinite(model(torch.tensor([[1, 2, 3]], device="cpu"))).all()


def test_training_refuses_a_folder_that_holds_files_without_force(tmp_path, capsys):
    out = tmp_path / "model"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"shipped")
    with pytest.raises(SystemExit):
        train_main(["--preset", "tiny", "--out", str(out), "--work", str(tmp_path / "work")])
    assert "--force" in capsys.readouterr().err and (out / "model.safetensors").read_bytes() == b"shipped"
