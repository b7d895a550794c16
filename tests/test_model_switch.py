"""The model switch the README promises: every notebook runs with MODEL set to another Qwen3 checkpoint.

The checkpoint is made here: random weights, a vocabulary of 1024 from a byte-level BPE trained on a few
standard-library files (the embedded models have 4096), hidden size 128 (they have 256 and 192) and
its own tokenizer, so nothing that only fits the embedded models (the small draft model, the shipped
heads) can be used on it unnoticed.
"""
import json

import nbformat
import pytest
import torch

from mini_llm import Config, Transformer, load_model, load_tokenizer
from mini_llm.corpus import build_corpus, read_texts, train_tokenizer
from tests.test_notebooks import CELL_TIMEOUT, NOTEBOOKS, execute

VOCAB, HIDDEN = 1024, 128


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory):
    """A random Qwen3 checkpoint (HF format, own tokenizer) whose vocabulary and hidden size differ from the embedded one's."""
    folder = tmp_path_factory.mktemp("other-qwen3")
    files = build_corpus(include_tests=False).train_files[:40]
    train_tokenizer(read_texts(files), folder, vocab_size=VOCAB)
    eot = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]["<|endoftext|>"]
    cfg = Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=384, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096,
                 rope_theta=10_000.0, tie_word_embeddings=True, eos_token_id=eot, bos_token_id=eot)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, 0.1)  # logits spread over a few nats, so greedy text is not one repeated token
    model.save_pretrained(folder)
    return folder


def test_the_other_checkpoint_differs_and_loads(other_checkpoint):
    model, tok = load_model(other_checkpoint), load_tokenizer(other_checkpoint)
    embedded = load_model("tiny-qwen3")
    assert model.cfg.vocab_size != embedded.cfg.vocab_size and model.cfg.hidden_size != embedded.cfg.hidden_size
    ids = tok.encode("def main():\n    return 0\n")
    assert max(ids) < VOCAB and tok.decode(ids) == "def main():\n    return 0\n"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_another_model(path, other_checkpoint, tmp_path):
    nb, _ = execute.execute_notebook(path, timeout=CELL_TIMEOUT, write=False, model=str(other_checkpoint), out=tmp_path)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert f"MODEL = {str(other_checkpoint)!r}" in first.source
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert str(other_checkpoint) in printed or other_checkpoint.name in printed, "the notebook says which model it runs"
    assert nbformat.read(path, as_version=4).cells[0].source == nb.cells[0].source  # the notebook file is untouched
