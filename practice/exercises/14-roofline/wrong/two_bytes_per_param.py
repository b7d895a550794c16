"""Assumes 2 bytes per parameter (bf16) instead of reading hw['weight_bytes']."""


def roofline_step_time(batch, tokens_per_seq, context, hw):
    memory = (2 * hw["params"] + batch * context * hw["kv_bytes_per_token"]) / hw["bandwidth"]
    compute = 2 * hw["params"] * batch * tokens_per_seq / (hw["peak_flops"] * hw["efficiency"])
    return max(memory, compute) + hw["fixed_s"]
