"""Runs inside vLLM's environment (`env.ensure()`), with vLLM and the standard library only:

    python worker.py JOB.json OUT.json

JOB: {"model", "prompts" (token ids), "max_tokens", "speculative_config" (or null), "one_at_a_time",
"max_model_len", "repeats", "max_num_seqs"}. Greedy, no EOS stop. OUT: {"tokens" (new ids per prompt), "seconds" (wall time of
each repeat of the generation, after one warm-up request), "counters" (vLLM's `vllm:spec_decode_*` counters over the
first repeat; empty without speculation)}.
"""
import json
import sys
import time

from vllm import LLM, SamplingParams

PREFIX = "vllm:spec_decode_"


def counters(llm: LLM) -> dict:
    """vLLM's speculative-decoding counters (cumulative): name without the prefix -> int or list of ints."""
    out = {}
    for metric in llm.get_metrics():
        if metric.name.startswith(PREFIX):
            out[metric.name[len(PREFIX):]] = getattr(metric, "values", None) or metric.value
    return out


def minus(after: dict, before: dict) -> dict:
    """The counters' growth between two reads."""
    def diff(a, b):
        return [x - y for x, y in zip(a, b + [0] * (len(a) - len(b)))] if isinstance(a, list) else a - b
    return {name: diff(value, before.get(name, [] if isinstance(value, list) else 0)) for name, value in after.items()}


def main(job_path: str, out_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, max_model_len=job["max_model_len"],
              gpu_memory_utilization=0.3, max_num_seqs=job["max_num_seqs"],
              speculative_config=job["speculative_config"], disable_log_stats=False,
              seed=0)
    greedy = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True)
    requests = [{"prompt_token_ids": p} for p in job["prompts"]]
    llm.generate(requests[:1], SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True), use_tqdm=False)
    seconds, counted = [], None
    for _ in range(job["repeats"]):
        before = counters(llm)
        start = time.perf_counter()
        if job["one_at_a_time"]:
            outputs = [out for r in requests for out in llm.generate([r], greedy, use_tqdm=False)]
        else:
            outputs = llm.generate(requests, greedy, use_tqdm=False)
        seconds.append(time.perf_counter() - start)
        counted = counted or minus(counters(llm), before)
    result = {"tokens": [list(o.outputs[0].token_ids) for o in outputs], "seconds": seconds, "counters": counted}
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
