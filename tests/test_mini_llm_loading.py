"""Loading: clear errors naming the problem; fp32/bf16; devices; fake quantization."""
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from mini_llm import Config, Transformer, fake_quant_int, generate, quantized_copy


def copy_checkpoint(src, dst, edit_tensors=None, edit_config=None):
    shutil.copytree(src, dst)
    if edit_tensors:
        tensors = load_file(str(dst / "model.safetensors"))
        edit_tensors(tensors)
        save_file(tensors, str(dst / "model.safetensors"))
    if edit_config:
        cfg = json.loads((dst / "config.json").read_text())
        edit_config(cfg)
        (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_missing_folder_and_files(tmp_path, tiny_checkpoint):
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        Transformer.from_pretrained(tmp_path / "nope")
    no_config = copy_checkpoint(tiny_checkpoint, tmp_path / "a")
    (no_config / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        Transformer.from_pretrained(no_config)
    no_weights = copy_checkpoint(tiny_checkpoint, tmp_path / "b")
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="safetensors"):
        Transformer.from_pretrained(no_weights)


def test_wrong_model_type(tmp_path, tiny_checkpoint):
    path = copy_checkpoint(tiny_checkpoint, tmp_path / "m", edit_config=lambda c: c.update(model_type="llama"))
    with pytest.raises(ValueError, match="model_type='llama'"):
        Transformer.from_pretrained(path)


def test_missing_unexpected_and_misshaped_tensors_are_named(tmp_path, tiny_checkpoint):
    def edit(t):
        del t["model.layers.1.mlp.up_proj.weight"]
        t["model.layers.0.extra.weight"] = torch.zeros(2, device="cpu")
        t["model.layers.0.self_attn.k_norm.weight"] = torch.ones(7, device="cpu")

    path = copy_checkpoint(tiny_checkpoint, tmp_path / "m", edit_tensors=edit)
    with pytest.raises(ValueError) as err:
        Transformer.from_pretrained(path)
    msg = str(err.value)
    assert "missing: layers.1.mlp.up_proj.weight" in msg
    assert "unexpected: layers.0.extra.weight" in msg
    assert "mis-shaped: layers.0.self_attn.k_norm.weight: checkpoint (7,)" in msg


def test_corrupt_safetensors_file(tmp_path, tiny_checkpoint):
    path = copy_checkpoint(tiny_checkpoint, tmp_path / "m")
    (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="cannot read"):
        Transformer.from_pretrained(path)


def test_config_reads_both_rope_conventions():
    base = dict(model_type="qwen3", vocab_size=10, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1)
    assert Config.from_dict({**base, "rope_theta": 5000.0}).rope_theta == 5000.0
    assert Config.from_dict({**base, "rope_parameters": {"rope_type": "default", "rope_theta": 7.0}}).rope_theta == 7.0
    assert Config.from_dict(base).head_dim == 4
    with pytest.raises(NotImplementedError, match="yarn"):
        Config.from_dict({**base, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})


def test_bf16_runs_and_stays_close_to_fp32(tiny_checkpoint):
    fp32 = Transformer.from_pretrained(tiny_checkpoint)
    bf16 = Transformer.from_pretrained(tiny_checkpoint, dtype=torch.bfloat16)
    assert bf16.dtype == torch.bfloat16
    ids = torch.randint(0, fp32.cfg.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0), device="cpu")
    with torch.no_grad():
        a, b = fp32(ids), bf16(ids).float()
    # bf16 keeps 8 mantissa bits (relative error ~4e-3 per op); after a few layers logits of scale ~10
    # typically move by ~0.1. 5 % of the logit range is a loose but meaningful bound.
    assert (a - b).abs().max() < 0.05 * (a.max() - a.min())
    assert generate(bf16, ids, 8).shape == (1, 8)


def test_load_model_takes_a_dtype_by_name(tiny_checkpoint):
    from mini_llm import load_model

    assert load_model(tiny_checkpoint, dtype="bfloat16").dtype == torch.bfloat16
    assert load_model(tiny_checkpoint, dtype="torch.float32").dtype == torch.float32
    with pytest.raises(ValueError, match="not a torch dtype"):
        load_model(tiny_checkpoint, dtype="bf16")


def test_cpu_weights_keep_their_longer_axis_contiguous_and_the_checkpoint_values(tiny_checkpoint):
    """`gemv_layout`: a matrix with more outputs than inputs is stored column-major (W^T contiguous), any other
    row-major; the values and the names written back are the checkpoint's."""
    model = Transformer.from_pretrained(tiny_checkpoint)
    saved = load_file(str(tiny_checkpoint / "model.safetensors"))
    matrices = {name: p for name, p in model.named_parameters() if p.ndim == 2}
    layouts = {("column" if p.t().is_contiguous() and not p.is_contiguous() else "row") for p in matrices.values()}
    assert layouts == {"column", "row"}  # the tiny config has both shapes: gate/up (more outputs), down (more inputs)
    for name, p in matrices.items():
        longer_axis = 0 if p.shape[0] > p.shape[1] else 1
        assert p.stride(longer_axis) == 1, f"{name} {tuple(p.shape)} has strides {p.stride()}"
    for name, tensor in model.hf_state_dict().items():
        assert torch.equal(tensor, saved[name]) and tensor.is_contiguous(), name


def test_no_hidden_cpu_tensors_on_the_meta_device(tiny_checkpoint):
    """Run the whole forward on the 'meta' device: any tensor created on the CPU would raise."""
    model = Transformer.from_pretrained(tiny_checkpoint, device="meta")
    cache = model.new_cache(max_len=16)
    ids = torch.zeros(1, 4, dtype=torch.long, device="meta")
    with torch.no_grad():
        model(ids, cache=cache)
        logits, hidden = model(ids[:, :3], cache=cache, positions=torch.tensor([4, 5, 5], device="meta"),
                               mask=torch.ones(3, 3, dtype=torch.bool, device="meta").tril(), return_hidden=True)
    assert logits.device.type == "meta" and cache.length == 7


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_cuda_matches_cpu(tiny_checkpoint):
    cpu = Transformer.from_pretrained(tiny_checkpoint)
    gpu = Transformer.from_pretrained(tiny_checkpoint, device="cuda")
    ids = torch.randint(0, cpu.cfg.vocab_size, (1, 12), generator=torch.Generator().manual_seed(0), device="cpu")
    with torch.no_grad():
        assert (gpu(ids.cuda()).cpu() - cpu(ids)).abs().max() < 1e-3  # TF32/kernels differ from CPU
    assert generate(gpu, ids.cuda(), 10).device.type == "cuda"


def test_fake_quant_int_error_and_levels():
    w = torch.randn(8, 256, generator=torch.Generator().manual_seed(0), device="cpu")
    for bits in (2, 4, 8):
        q = fake_quant_int(w, bits, "group", 128)
        groups, qgroups = w.reshape(-1, 128), q.reshape(-1, 128)
        scale = groups.abs().amax(-1, keepdim=True) / (2 ** (bits - 1) - 1)
        assert ((groups - qgroups).abs() <= scale / 2 + 1e-6).all()  # round-to-nearest: at most half a step
        assert all(len(torch.unique(g)) <= 2 ** bits for g in qgroups)
    assert (fake_quant_int(w, 8) - w).abs().max() < (fake_quant_int(w, 4) - w).abs().max()
    with pytest.raises(ValueError, match="divisible"):
        fake_quant_int(torch.randn(4, 100, device="cpu"), 4, "group", 128)


def test_quantized_copy_keeps_embeddings_and_norms(tiny_checkpoint):
    model = Transformer.from_pretrained(tiny_checkpoint)
    q = quantized_copy(model, bits=4, group=32)
    for (name, a), (_, b) in zip(model.named_parameters(), q.named_parameters()):
        changed = not torch.equal(a, b)
        is_projection = "proj" in name and name.startswith("layers.")
        assert changed == is_projection, name
