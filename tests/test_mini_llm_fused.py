"""Fused projections keep the checkpoint's names: q/k/v and gate/up are one matmul each, yet state_dict,
load_state_dict, save_pretrained and quantized_copy see the separate Hugging Face matrices; a decode step
builds no tensor."""
import pytest
import torch
from safetensors.torch import load_file
from torch.utils._python_dispatch import TorchDispatchMode

from mini_llm import Config, Transformer, fake_quant_int, quantized_copy
from mini_llm.model import DecoderLayer

SEPARATE = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")


def test_state_dict_has_the_checkpoint_names_and_values(hf_checkpoint, tmp_path):
    name, hf, path = hf_checkpoint
    model = Transformer.from_pretrained(path)
    checkpoint = {k.removeprefix("model."): v for k, v in load_file(str(path / "model.safetensors")).items()}
    if model.cfg.tie_word_embeddings:
        checkpoint.pop("lm_head.weight", None)
    state = model.state_dict()
    assert sorted(state) == sorted(checkpoint), name
    assert all(torch.equal(state[k], checkpoint[k]) for k in checkpoint), name
    assert not any("qkv_proj" in k or "gate_up_proj" in k for k in state)
    layer = model.layers[0]
    assert torch.equal(layer.self_attn.k_proj.weight, checkpoint["layers.0.self_attn.k_proj.weight"])
    assert torch.equal(layer.mlp.up_proj.weight, checkpoint["layers.0.mlp.up_proj.weight"])
    model.save_pretrained(tmp_path)
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert all(torch.equal(saved[k if k.startswith("lm_head.") else f"model.{k}"], v) for k, v in checkpoint.items())


def test_load_state_dict_takes_separate_or_fused_names(tiny_checkpoint):
    model = Transformer.from_pretrained(tiny_checkpoint)
    with torch.device("cpu"):
        fresh, layer = Transformer(model.cfg).eval(), DecoderLayer(model.cfg, 0)
    fresh.load_state_dict(model.state_dict())  # separate names, as in a checkpoint or an older state dict
    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), model.parameters()))
    fused = {k: p.detach() for k, p in model.layers[0].named_parameters()}
    assert "self_attn.qkv_proj.weight" in fused and "mlp.gate_up_proj.weight" in fused
    layer.load_state_dict(fused)  # the fused names load too
    old = model.layers[0].state_dict()
    assert all(f"{s}.weight" in old for s in SEPARATE)
    layer.load_state_dict(old)
    expected = torch.cat([old[f"self_attn.{p}_proj.weight"] for p in "qkv"])
    assert torch.equal(layer.self_attn.qkv_proj.weight, expected)
    with pytest.raises(RuntimeError, match="qkv_proj"):
        layer.load_state_dict({k: v for k, v in old.items() if k != "self_attn.v_proj.weight"})


def test_biases_split_and_join_in_checkpoint_order():
    cfg = Config(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=8, attention_bias=True)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model, fresh = Transformer(cfg), Transformer(cfg)
    state = model.state_dict()
    attn = [k.removeprefix("layers.0.self_attn.") for k in state if k.startswith("layers.0.self_attn.")]
    assert attn == ["q_proj.weight", "k_proj.weight", "v_proj.weight", "q_proj.bias", "k_proj.bias", "v_proj.bias",
                    "o_proj.weight", "o_proj.bias", "q_norm.weight", "k_norm.weight"]
    assert state["layers.0.self_attn.k_proj.bias"].shape == (16,)
    fresh.load_state_dict(state)
    assert torch.equal(fresh.layers[0].self_attn.qkv_proj.bias, model.layers[0].self_attn.qkv_proj.bias)
    assert torch.equal(fresh.layers[0].self_attn.v_proj.bias, state["layers.0.self_attn.v_proj.bias"])


@pytest.mark.parametrize("granularity", ["group", "channel", "tensor"])
def test_quantized_copy_quantizes_each_checkpoint_matrix(tiny_checkpoint, granularity):
    model = Transformer.from_pretrained(tiny_checkpoint)
    quantized = quantized_copy(model, bits=4, granularity=granularity, group=32).state_dict()
    for k, w in model.state_dict().items():
        if k.startswith("layers.") and k.endswith("proj.weight"):
            assert torch.equal(quantized[k], fake_quant_int(w, 4, granularity, 32)), k


def test_decode_step_builds_no_tensor(tiny_checkpoint):
    """A decode step on a uniform cache reads positions and RoPE rows as views: no arange, no torch.tensor."""
    model = Transformer.from_pretrained(tiny_checkpoint)
    factories = {"arange", "lift_fresh", "scalar_tensor", "zeros", "ones", "full", "empty", "randn", "tensor"}

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    cache = model.new_cache(batch_size=2, max_len=16)
    prompt, step = torch.tensor([[1, 2, 3], [4, 5, 6]], device="cpu"), torch.tensor([[7], [8]], device="cpu")
    with torch.inference_mode():
        model(prompt, cache=cache)
        with Ops() as ops:
            model(step, cache=cache)
    assert ops.names and not factories & set(ops.names), sorted(set(ops.names))
