"""The shipped models: they load identically in transformers and mini_llm, the tokenizer round-trips,
the target is clearly better and clearly more expensive than the draft, and models/ stays small."""
import pytest
import torch
import torch.nn.functional as F

from mini_llm import Transformer, load_model, load_tokenizer
from mini_llm.card import decode_ms_per_token
from mini_llm.corpus import build_corpus, read_texts
from mini_llm.train import eval_windows

from .conftest import DRAFT_DIR, REPO, TARGET_DIR

SHIPPED = [p for p in (TARGET_DIR, DRAFT_DIR) if (p / "model.safetensors").exists()]
pytestmark = pytest.mark.skipif(len(SHIPPED) < 2, reason="the shipped models are not present")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_transformers_and_mini_llm_give_the_same_logits(path):
    from transformers import AutoModelForCausalLM

    ours = Transformer.from_pretrained(path, dtype=torch.float32)
    with torch.device("cpu"):
        theirs = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True).eval()
    ids = torch.tensor([load_tokenizer(path).encode("def parse(self, text):\n    return text.split()")], device="cpu")
    with torch.no_grad():
        diff = (ours(ids) - theirs(ids).logits).abs().max().item()
    assert diff < 1e-4, diff  # fp32 on both sides, same bf16-stored weights upcast


def test_tokenizer_round_trips_every_held_out_file():
    tok = load_tokenizer("tiny-qwen3")
    texts = read_texts(build_corpus().held_out_files)
    assert len(texts) > 50
    for text in texts:
        assert tok.decode(tok.encode(text)) == text


def test_tokenizer_gives_autotokenizers_ids_and_text():
    """mini_llm's Tokenizer reads tokenizer.json with the `tokenizers` library; transformers' AutoTokenizer
    reads the same file: the same ids, text and vocabulary, special tokens included."""
    from transformers import AutoTokenizer

    tok, auto = load_tokenizer("tiny-qwen3"), AutoTokenizer.from_pretrained(str(TARGET_DIR), local_files_only=True)
    assert tok.get_vocab() == auto.get_vocab() and tok.vocab_size == len(auto)
    for text in read_texts(build_corpus().held_out_files[:20]) + ["<|endoftext|>def f():\n\treturn 'é'<|endoftext|>"]:
        ids = tok.encode(text)
        assert ids == auto.encode(text, verbose=False)
        assert tok.decode(ids) == auto.decode(ids) == tok.decode(torch.tensor(ids, device="cpu"))
    eos = auto.convert_tokens_to_ids("<|endoftext|>")
    assert tok.encode("<|endoftext|>") == [eos] and tok.decode(eos) == "<|endoftext|>"


def test_tokenizer_file_missing_or_broken_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"model": ')
    with pytest.raises(ValueError, match="not a valid tokenizer file"):
        load_tokenizer(tmp_path)


def held_out_loss(model: Transformer, windows: torch.Tensor) -> float:
    with torch.no_grad():
        logits = model(windows[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()


@pytest.mark.slow
def test_target_is_clearly_better_than_the_draft_on_held_out_files():
    import numpy as np

    from mini_llm.corpus import encode_files
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TARGET_DIR / "tokenizer.json"))
    stream = encode_files(tok, read_texts(build_corpus().held_out_files))
    windows = eval_windows(np.asarray(stream), 256, 48)  # 48 x 256 tokens spread over all held-out files
    target, draft = held_out_loss(load_model("tiny-qwen3"), windows), held_out_loss(load_model("tiny-qwen3-draft"), windows)
    # The acceptance bar is 3.2 nats/token for the target and a 0.3 gap; on 12k tokens the standard
    # error of a mean loss is ~0.02, so the bars are applied without extra slack.
    assert target <= 3.2, target
    assert draft - target >= 0.3, (target, draft)


@pytest.mark.slow
def test_target_decode_costs_at_least_five_drafts():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: a busy second core cannot stall it at a thread barrier
    try:
        ms = decode_ms_per_token({"target": load_model("tiny-qwen3"), "draft": load_model("tiny-qwen3-draft")},
                                 new_tokens=48, repeats=7)
    finally:
        torch.set_num_threads(threads)
    # The draft does 5x less compute per token (non-embedding parameters) on any hardware. Measured decode
    # time ratios depend on the CPU: 7.4x on a 2-core AMD EPYC (5.55 vs 0.75 ms/token), 4.3-4.7x on a 2-core
    # Intel Xeon (3.58 vs 0.82), where the draft's per-token time is mostly fixed per-layer overhead; the
    # measured bar is 4x so that both CPUs pass; the compute bar is 5x.
    def compute(m):
        return sum(p.numel() for n, p in m.named_parameters() if "embed_tokens" not in n and "lm_head" not in n)

    assert compute(load_model("tiny-qwen3")) >= 5 * compute(load_model("tiny-qwen3-draft"))
    assert ms["target"] >= 4 * ms["draft"], ms


def test_models_folder_stays_small():
    tracked = [p for p in (REPO / "models").rglob("*") if p.is_file() and "/." not in str(p.relative_to(REPO))]
    total_mb = sum(p.stat().st_size for p in tracked) / 2**20
    assert total_mb < 40, f"models/ holds {total_mb:.1f} MB"
