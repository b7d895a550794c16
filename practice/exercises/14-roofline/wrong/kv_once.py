"""Reads the KV cache once per step instead of once per sequence."""
def roofline_step_time(batch, tokens_per_seq, context, hw):
    memory = (hw["weight_bytes"] + context * hw["kv_bytes_per_token"]) / hw["bandwidth"]
    compute = 2 * hw["params"] * batch * tokens_per_seq / (hw["peak_flops"] * hw["efficiency"])
    return max(memory, compute) + hw["fixed_s"]
