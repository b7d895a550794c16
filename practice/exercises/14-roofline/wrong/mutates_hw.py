"""Folds the efficiency into the caller's hw['peak_flops'] in place."""


def roofline_step_time(batch, tokens_per_seq, context, hw):
    hw["peak_flops"] *= hw["efficiency"]
    hw["efficiency"] = 1.0
    memory = (hw["weight_bytes"] + batch * context * hw["kv_bytes_per_token"]) / hw["bandwidth"]
    compute = 2 * hw["params"] * batch * tokens_per_seq / hw["peak_flops"]
    return max(memory, compute) + hw["fixed_s"]
