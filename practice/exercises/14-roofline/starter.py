def roofline_step_time(batch: int, tokens_per_seq: int, context: int, hw: dict[str, float]) -> float:
    """Seconds for one forward step. hw keys: params, weight_bytes, kv_bytes_per_token, bandwidth
    (bytes/s), peak_flops (FLOP/s), efficiency (fraction of peak), fixed_s (seconds)."""
    raise NotImplementedError("memory time vs compute time")
