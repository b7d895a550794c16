def roofline_step_time(batch: int, tokens_per_seq: int, context: int, hw: dict[str, float]) -> float:
    """Seconds for one forward step. hw keys: params, weight_bytes, kv_bytes_per_token, bandwidth
    (bytes/s), peak_flops (FLOP/s), efficiency (fraction of peak), fixed_s (seconds)."""
    memory = (hw["weight_bytes"] + batch * context * hw["kv_bytes_per_token"]) / hw["bandwidth"]
    compute = 2 * hw["params"] * batch * tokens_per_seq / (hw["peak_flops"] * hw["efficiency"])
    return max(memory, compute) + hw["fixed_s"]
