"""Sampling: seeded reproducibility, top-k / top-p support sets, EOS handling."""
import pytest
import torch

from mini_llm import Transformer, generate, logits_to_probs


@pytest.fixture(scope="module")
def model(tiny_checkpoint):
    return Transformer.from_pretrained(tiny_checkpoint)


def prompt(model, n=6, seed=0):
    return torch.randint(0, model.cfg.vocab_size, (1, n), generator=torch.Generator().manual_seed(seed), device="cpu")


def test_seeded_sampling_is_reproducible(model):
    ids = prompt(model)
    runs = [generate(model, ids, 30, temperature=1.0, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    other = generate(model, ids, 30, temperature=1.0, generator=torch.Generator().manual_seed(8))
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], other)


def test_top_k_and_top_p_support_sets():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0), device="cpu") * 3
    probs_k = logits_to_probs(logits, temperature=1.0, top_k=5)
    assert ((probs_k > 0).sum(-1) == 5).all()
    assert torch.equal(probs_k > 0, logits >= logits.topk(5).values[:, -1:])
    full = logits_to_probs(logits, temperature=1.0)
    probs_p = logits_to_probs(logits, temperature=1.0, top_p=0.6)
    for row in range(4):
        kept = probs_p[row] > 0
        # the kept set is the smallest prefix of the sorted distribution whose mass reaches 0.6
        sorted_full = full[row].sort(descending=True).values
        n_needed = int((sorted_full.cumsum(0) < 0.6).sum()) + 1
        assert int(kept.sum()) == n_needed
        assert full[row][kept].min() >= full[row][~kept].max()
    assert torch.allclose(probs_p.sum(-1), torch.ones(4, device="cpu"))


def test_sampled_tokens_stay_inside_top_k(model):
    ids = prompt(model, seed=3)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        logits = model(ids)[:, -1]
    allowed = set(logits.topk(3).indices[0].tolist())
    first_tokens = {generate(model, ids, 1, temperature=2.0, top_k=3, generator=gen).item() for _ in range(60)}
    assert first_tokens <= allowed and len(first_tokens) > 1


def test_sampled_tokens_stay_inside_top_p(model):
    ids = prompt(model, seed=4)
    with torch.no_grad():
        logits = model(ids)[:, -1]
    nucleus = set(torch.nonzero(logits_to_probs(logits, 1.0, top_p=0.5)[0]).flatten().tolist())
    gen = torch.Generator().manual_seed(1)
    first_tokens = {generate(model, ids, 1, temperature=1.0, top_p=0.5, generator=gen).item() for _ in range(60)}
    assert first_tokens <= nucleus


def test_eos_stops_generation(model):
    ids = prompt(model, seed=5)
    free = generate(model, ids, 20)[0].tolist()
    eos = free[6]
    stopped = generate(model, ids, 20, eos_token_id=eos)[0].tolist()
    assert stopped == free[: free.index(eos) + 1]


def test_eos_pads_finished_rows_in_a_batch(model):
    ids = torch.cat([prompt(model, seed=6), prompt(model, seed=7)])
    free = generate(model, ids, 12)
    eos = free[0, 3].item()
    out = generate(model, ids, 12, eos_token_id=eos)
    for row in range(2):
        seq = free[row].tolist()
        if eos in seq:
            stop = seq.index(eos) + 1
            assert out[row, :stop].tolist() == seq[:stop]
            assert (out[row, stop:] == eos).all()
        else:
            assert out[row].tolist() == seq[: out.shape[1]]


def test_zero_new_tokens_and_bad_arguments(model):
    assert generate(model, prompt(model), 0).shape == (1, 0)
    with pytest.raises(ValueError, match="top_k"):
        logits_to_probs(torch.zeros(1, 5, device="cpu"), 1.0, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        logits_to_probs(torch.zeros(1, 5, device="cpu"), 1.0, top_p=1.5)


@pytest.mark.parametrize("form", ["int", "list", "numpy", "tensor", "tensor_list"])
def test_eos_token_id_means_the_same_in_every_form(model, form):
    import numpy as np

    ids = prompt(model, seed=5)
    free = generate(model, ids, 20)[0].tolist()
    eos = free[6]
    never = min(set(range(model.cfg.vocab_size)) - set(free))  # a second EOS id this run never writes
    as_form = {"int": eos, "list": [eos, never], "numpy": np.int64(eos),
               "tensor": torch.tensor(eos, device="cpu"),
               "tensor_list": torch.tensor([eos, never], device="cpu")}[form]
    assert generate(model, ids, 20, eos_token_id=as_form)[0].tolist() == free[: free.index(eos) + 1]


def test_generate_refuses_odd_input_with_the_loops_errors(model):
    ids = prompt(model)
    limit = model.cfg.max_position_embeddings
    with pytest.raises(ValueError, match="integer tensor"):
        generate(model, ids.float() + 0.4, 5)  # would silently become other tokens if truncated
    with pytest.raises(ValueError, match="empty"):
        generate(model, torch.zeros(1, 0, dtype=torch.long, device="cpu"), 5)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        generate(model, ids, limit - ids.shape[1] + 1)
    for bad in (2.5, 3.0, "3", True, None):
        with pytest.raises(ValueError, match="max_new_tokens"):
            generate(model, ids, bad)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, ids, -1)
    with pytest.raises(ValueError, match="eos_token_id"):
        generate(model, ids, 3, eos_token_id=1.5)
    with pytest.raises(ValueError, match="eos_token_id"):
        generate(model, ids, 3, eos_token_id=torch.tensor([1.0], device="cpu"))
    for outside in (-1, model.cfg.vocab_size):
        with pytest.raises(ValueError, match="eos_token_id .* outside the model's vocabulary"):
            generate(model, ids, 3, eos_token_id=[2, outside])
        with pytest.raises(ValueError, match="prompt token .* outside the model's vocabulary"):
            generate(model, [2, outside], 3)
    with pytest.raises(ValueError, match="encode it first"):
        generate(model, "def f(x):", 3)
    with pytest.raises(ValueError, match="empty"):
        generate(model, torch.tensor([[]]), 3)  # what torch.tensor([tokenizer.encode("")]) makes: a float tensor


def test_generate_accepts_integer_like_arguments(model):
    import numpy as np

    ids = prompt(model)
    expected = generate(model, ids, 5)
    assert torch.equal(generate(model, ids, np.int64(5)), expected)
    assert torch.equal(generate(model, ids, torch.tensor(5, device="cpu")), expected)
    assert torch.equal(generate(model, ids[0].tolist(), 5), expected)  # a list is one prompt
    assert torch.equal(generate(model, ids.int(), 5), expected)  # int32 ids are fine
