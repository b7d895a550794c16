"""Tree-masked forward, rollback and compaction: the cache operations speculative decoding relies on."""
import pytest
import torch

from mini_llm import Transformer

TOL = 1e-4  # fp32, same weights, different kernel shapes: observed differences are ~1e-6

# A 6-node tree: root 0 with children 1 and 2; 1 -> 3, 1 -> 4; 2 -> 5.
PARENTS = [-1, 0, 0, 1, 1, 2]
DEPTHS = [0, 1, 1, 2, 2, 2]


def ancestors_mask(parents):
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool, device="cpu")
    for i in range(n):
        j = i
        while j != -1:
            mask[i, j] = True
            j = parents[j]
    return mask


def path_to(node, parents):
    path = []
    while node != -1:
        path.append(node)
        node = parents[node]
    return path[::-1]


@pytest.fixture(scope="module")
def model(tiny_checkpoint):
    return Transformer.from_pretrained(tiny_checkpoint)


@torch.no_grad()
def test_tree_forward_equals_each_path_as_a_sequence(model):
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, model.cfg.vocab_size, (1, 9), generator=gen, device="cpu")
    tree = torch.randint(0, model.cfg.vocab_size, (1, len(PARENTS)), generator=gen, device="cpu")
    cache = model.new_cache(max_len=32)
    model(prefix, cache=cache)
    positions = prefix.shape[1] + torch.tensor(DEPTHS, device="cpu")
    tree_logits = model(tree, cache=cache, positions=positions, mask=ancestors_mask(PARENTS))
    assert cache.length == prefix.shape[1] + len(PARENTS)
    for node in range(len(PARENTS)):
        seq = torch.cat([prefix, tree[:, path_to(node, PARENTS)]], dim=1)
        alone = model(seq)[:, -1]
        assert (tree_logits[:, node] - alone).abs().max() < TOL, f"node {node}"


@torch.no_grad()
def test_compact_keeps_accepted_path_like_a_fresh_prefill(model):
    gen = torch.Generator().manual_seed(1)
    prefix = torch.randint(0, model.cfg.vocab_size, (1, 7), generator=gen, device="cpu")
    tree = torch.randint(0, model.cfg.vocab_size, (1, len(PARENTS)), generator=gen, device="cpu")
    cache = model.new_cache(max_len=32)
    model(prefix, cache=cache)
    model(tree, cache=cache, positions=7 + torch.tensor(DEPTHS, device="cpu"), mask=ancestors_mask(PARENTS))
    accepted = [0, 2, 5]
    cache.compact(7, accepted)
    assert cache.length == 10
    nxt = torch.tensor([[3]], device="cpu")
    got = model(nxt, cache=cache)[:, -1]
    fresh = model(torch.cat([prefix, tree[:, accepted], nxt], dim=1))[:, -1]
    assert (got - fresh).abs().max() < TOL


@torch.no_grad()
def test_truncate_rolls_back_like_a_fresh_prefill(model):
    ids = torch.randint(0, model.cfg.vocab_size, (2, 15), generator=torch.Generator().manual_seed(2), device="cpu")
    cache = model.new_cache(batch_size=2, max_len=20)
    model(ids, cache=cache)
    cache.truncate(9)
    nxt = torch.tensor([[5], [6]], device="cpu")
    got = model(nxt, cache=cache)[:, -1]
    fresh = model(torch.cat([ids[:, :9], nxt], dim=1))[:, -1]
    assert cache.length == 10
    assert (got - fresh).abs().max() < TOL


@torch.no_grad()
def test_hidden_states_and_chosen_layers(model):
    ids = torch.randint(0, model.cfg.vocab_size, (1, 6), generator=torch.Generator().manual_seed(3), device="cpu")
    logits, hidden = model(ids, return_hidden=True)
    assert hidden.shape == (1, 6, model.cfg.hidden_size)
    assert torch.equal(model.logits_from_hidden(hidden), logits)
    logits2, hidden2, layers = model(ids, hidden_layers=[0, 1])
    assert len(layers) == 2 and torch.equal(layers[-1], hidden2)  # the last layer's output is the final hidden
    assert torch.equal(logits2, logits)
    _, _, picked = model(ids, hidden_layers=[1, 0, 1])  # the listed order, repeats included
    assert [torch.equal(a, layers[i]) for a, i in zip(picked, [1, 0, 1])] == [True] * 3
    with pytest.raises(ValueError, match="hidden_layers"):
        model(ids, hidden_layers=[2])


def test_cache_rejects_bad_operations(model):
    cache = model.new_cache(max_len=8)
    with torch.no_grad():
        model(torch.zeros(1, 5, dtype=torch.long, device="cpu"), cache=cache)
        with pytest.raises(ValueError, match="overflow"):
            model(torch.zeros(1, 4, dtype=torch.long, device="cpu"), cache=cache)
    assert cache.length == 5, "a rejected forward must not move the cache"
    with pytest.raises(ValueError, match="truncate"):
        cache.truncate(6)
    with pytest.raises(ValueError, match="increasing"):
        cache.compact(1, [2, 1])
    with pytest.raises(ValueError, match="lie in"):
        cache.compact(2, [0, 3])


def test_mask_of_wrong_shape_or_dtype_is_rejected(model):
    ids = torch.zeros(1, 4, dtype=torch.long, device="cpu")
    with pytest.raises(ValueError, match=r"mask must be a \[4, 4\] or \[1, 4, 4\] bool"):
        model(ids, mask=torch.ones(3, 3, dtype=torch.bool, device="cpu"))
    with pytest.raises(ValueError, match="bool"):
        model(ids, mask=torch.ones(4, 4, device="cpu"))
    with pytest.raises(ValueError, match="positions"):
        model(ids, positions=torch.arange(5, device="cpu"))


def test_cache_made_in_inference_mode_stays_usable_outside_it(model):
    ids = torch.randint(0, model.cfg.vocab_size, (1, 6), device="cpu")
    with torch.inference_mode():
        cache = model.new_cache(max_len=16)
        model(ids[:, :4], cache=cache)
    with torch.no_grad():
        model(ids[:, 4:], cache=cache)  # writes outside inference mode
    cache.compact(2, [0, 2, 3])  # as after a tree verify pass
    assert cache.length == 5


# ------------------------------------------------------------------ per-row lengths (batched decoding)
def prefill_rows(model, rows, max_len):
    """A batch cache holding `rows` (token lists of different lengths): one padded forward, then each
    row truncated to its own length. Returns (cache, logits after each row's last token [B, V])."""
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], device="cpu")
    cache = model.new_cache(batch_size=len(rows), max_len=max_len)
    logits = model(ids, cache=cache)
    cache.truncate([len(r) for r in rows])
    return cache, logits[torch.arange(len(rows), device="cpu"), torch.tensor([len(r) - 1 for r in rows], device="cpu")]


@torch.no_grad()
def test_rows_of_different_lengths_match_each_row_alone(model):
    gen = torch.Generator().manual_seed(4)
    rows = [torch.randint(0, model.cfg.vocab_size, (n,), generator=gen, device="cpu").tolist() for n in (3, 9, 6)]
    cache, last = prefill_rows(model, rows, max_len=24)
    assert cache.lengths == [3, 9, 6] and not cache.uniform
    with pytest.raises(ValueError, match="different lengths"):
        cache.length
    new = torch.randint(0, model.cfg.vocab_size, (3, 4), generator=gen, device="cpu")
    got = model(new, cache=cache)  # default positions and causal mask, per row
    assert cache.lengths == [7, 13, 10]
    for b, row in enumerate(rows):
        alone = model(torch.tensor([row + new[b].tolist()], device="cpu"))[0]
        assert (last[b] - alone[len(row) - 1]).abs().max() < TOL, f"prefill row {b}"
        assert (got[b] - alone[len(row):]).abs().max() < TOL, f"new tokens of row {b}"


@torch.no_grad()
def test_rows_roll_back_and_compact_independently(model):
    gen = torch.Generator().manual_seed(5)
    rows = [torch.randint(0, model.cfg.vocab_size, (n,), generator=gen, device="cpu").tolist() for n in (5, 8)]
    cache, _ = prefill_rows(model, rows, max_len=32)
    tree = torch.randint(0, model.cfg.vocab_size, (2, len(PARENTS)), generator=gen, device="cpu")
    # [B, n]: each row's own prefix length + depth
    pos = torch.tensor([[5], [8]], device="cpu") + torch.tensor(DEPTHS, device="cpu")
    model(tree, cache=cache, positions=pos, mask=ancestors_mask(PARENTS).expand(2, -1, -1))
    cache.compact(5, [0, 2, 5], row=0)   # row 0 keeps the path 0 -> 2 -> 5; row 1 is untouched
    cache.truncate([8, 8 + 2])           # row 1 keeps root + node 1 (the path 0 -> 1); row 0 stays
    assert cache.lengths == [8, 10]
    nxt = torch.tensor([[3], [4]], device="cpu")
    got = model(nxt, cache=cache)[:, -1]
    kept = (rows[0] + tree[0, [0, 2, 5]].tolist(), rows[1] + tree[1, [0, 1]].tolist())
    for b, seq in enumerate(kept):
        fresh = model(torch.tensor([seq + nxt[b].tolist()], device="cpu"))[0, -1]
        assert (got[b] - fresh).abs().max() < TOL, f"row {b}"


@torch.no_grad()
def test_select_rows_keeps_the_chosen_rows(model):
    rows = [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10]]
    cache, _ = prefill_rows(model, rows, max_len=16)
    cache.select_rows([2, 0])
    assert cache.batch_size == 2 and cache.lengths == [2, 3]
    got = model(torch.tensor([[11], [12]], device="cpu"), cache=cache)[:, -1]
    for b, seq in enumerate(([9, 10, 11], [1, 2, 3, 12])):
        assert (got[b] - model(torch.tensor([seq], device="cpu"))[0, -1]).abs().max() < TOL
    with pytest.raises(ValueError, match="select_rows"):
        cache.select_rows([2])
    with pytest.raises(ValueError, match="truncate"):
        cache.truncate([1, 5])  # row 1 holds 4 tokens: it cannot grow by truncation
