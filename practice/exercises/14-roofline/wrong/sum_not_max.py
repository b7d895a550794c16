"""Adds memory and compute times instead of taking their maximum."""
def roofline_step_time(batch, tokens_per_seq, context, hw):
    memory = (hw["weight_bytes"] + batch * context * hw["kv_bytes_per_token"]) / hw["bandwidth"]
    compute = 2 * hw["params"] * batch * tokens_per_seq / (hw["peak_flops"] * hw["efficiency"])
    return memory + compute + hw["fixed_s"]
