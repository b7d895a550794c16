"""The benchmark's methods: every draft source in its natural form, its tuned shapes, and the transformers
baselines. A method runs one prompt: run(prompt, max_new_tokens, temperature, seed, trace) -> (new tokens,
SpecOutput or None); mini_llm's loops report their phases to `trace`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mini_llm import Transformer, generate

from ..core.contracts import SamplingParams, Trace
from ..core.output import SpecOutput
from ..decoding.chain import speculative_generate
from ..decoding.dynamic import dynamic_tree_speculative_generate
from ..decoding.lookahead import lookahead_generate
from ..decoding.tree import tree_speculative_generate
from ..drafters.base import Drafter
from ..drafters.head_io import load_head
from ..drafters.lookahead import LookaheadDrafter
from ..drafters.model import ModelDrafter, QuantizedSelfDrafter
from ..drafters.ngram import NGramDrafter
from .timing import TimeSplit
from .dynamic_search import dynamic_text
from .tuned import CONFIDENCE_STOP, FIXED_DYNAMIC, TUNED_DIR, load_tuned, tuned_drafter, tuned_dynamic

Runner = Callable[[list[int], int, float, int, Trace], tuple[list[int], SpecOutput | None]]

CHAIN_K = 4
SMALL_TREE = [2, 2, 1, 1]
MEDUSA_TREE = [3, 2, 2, 1]
EAGLE_TREE = [3, 2, 1, 1, 1]
DYNAMIC = FIXED_DYNAMIC
FALLBACK_CHAIN_K = 3  # shape rows for EAGLE-1 and MTP when no tuned shape was saved
# bench drafter -> its name in tree_spec.analysis.tune (models/tuned/<name>.json)
TUNE_NAMES = {"small": "small-model", "int4": "int4-self", "medusa": "medusa", "eagle": "eagle", "eagle3": "eagle3",
              "mtp": "mtp"}


@dataclass
class Method:
    """One benchmark row. drafter: the drafter object (timed per call); chain: τ predicted from per-depth α products;
    shape: the branching list of a fixed-branching tree or chain (None for other forms)."""

    name: str
    form: str
    run: Runner
    drafter: Drafter | None = None
    chain: bool = False
    shape: tuple[int, ...] | None = None
    spec: SpecOutput | None = None  # counters summed over the prompts
    totals: dict = field(default_factory=lambda: dict(tokens=0, identical=0, prompts=0))
    time: TimeSplit = field(default_factory=TimeSplit)  # summed over the prompts; its forwards are verify passes
def _sampling(temperature: float, seed: int, device: torch.device) -> SamplingParams:
    """`temperature` with a generator seeded with `seed`, on the device whose tensors it samples."""
    return SamplingParams(temperature, generator=torch.Generator(device=device).manual_seed(seed))


def _spec(out: SpecOutput) -> tuple[list[int], SpecOutput]:
    return out.tokens, out
def load_tuned_shapes(target: Transformer, draft: Transformer | None, heads_dir: Path, tuned_dir: Path,
                      model_name: str) -> tuple[dict[str, tuple[Drafter, list[int], dict]], list[str]]:
    """Tuned (drafter, branching, saved dict) per bench drafter key from `python -m tree_spec.analysis.tune`'s
    files, and notes on files that could not be used. The drafter carries its tuned draft vocabulary, if any."""
    shapes, notes = {}, []
    for key, name in TUNE_NAMES.items():
        if load_tuned(name, tuned_dir) is None:
            continue
        try:
            found = tuned_drafter(name, target, draft, heads_dir, tuned_dir, model_name)
        except (FileNotFoundError, ValueError, KeyError) as err:
            notes.append(f"{name} (tuned): {err}")
            continue
        if found is None:
            notes.append(f"{name} (tuned): tuned for another target")
            continue
        shapes[key] = (*found, load_tuned(name, tuned_dir))
    return shapes, notes


def spec_methods(target: Transformer, draft: Transformer | None, heads_dir: Path, tuned_dir: Path | None = TUNED_DIR,
                 greedy: bool = True, model_name: str = "tiny-qwen3") -> tuple[list[Method], list[str]]:
    """mini_llm methods in their natural form, plus tuned shapes; returns (methods, skipped methods with the reason)."""
    methods: list[Method] = []
    skipped: list[str] = []
    tuned, notes = load_tuned_shapes(target, draft, heads_dir, tuned_dir, model_name) if tuned_dir else ({}, [])
    skipped += notes

    def chain(drafter, k, name, form=None):
        run = lambda p, n, t, s, trace: _spec(speculative_generate(  # noqa: E731
            target, drafter, p, n, k=k, sampling=_sampling(t, s, target.device), trace=trace))
        return Method(name, form or f"chain k={k}", run, drafter, chain=True, shape=(1,) * k)

    def confident_chain(kind, drafter, name):
        saved = tuned[kind][2].get("confidence_stop") if kind in tuned else None
        setting = dict(k=saved["k"], min_path_prob=saved["min_path_prob"]) if saved else CONFIDENCE_STOP
        run = lambda p, n, t, s, trace: _spec(speculative_generate(  # noqa: E731
            target, drafter, p, n, **setting, sampling=_sampling(t, s, target.device), trace=trace))
        form = (f"chain k<={setting['k']}, stops below path probability {setting['min_path_prob']}"
                + (" (tuned)" if saved else ""))
        return Method(name, form, run, drafter)  # chains of varying length: τ predicted like a tree's

    def tree(drafter, branching, name, form=None):
        if all(w == 1 for w in branching):
            return chain(drafter, len(branching), name, form and form.replace("tree", "chain"))
        run = lambda p, n, t, s, trace: _spec(tree_speculative_generate(  # noqa: E731
            target, drafter, p, n, branching=branching, sampling=_sampling(t, s, target.device), trace=trace))
        return Method(name, form or f"tree {list(branching)}", run, drafter, shape=tuple(branching))

    def dynamic(drafter, name, setting=DYNAMIC, form=None):
        run = lambda p, n, t, s, trace: _spec(dynamic_tree_speculative_generate(  # noqa: E731
            target, drafter, p, n, **setting, sampling=_sampling(t, s, target.device), trace=trace))
        return Method(name, form or dynamic_text(setting), run, drafter)

    def tuned_dynamic_row(kind, name, fixed: Method):
        found = tuned_dynamic(kind, target, heads_dir, tuned_dir, model_name) if tuned_dir else None
        if found is None:
            return
        drafter, setting = found
        vocab = drafter.draft_vocab
        if setting == DYNAMIC and vocab is None:
            fixed.form += " (= tuned)"
            return
        extra = f", draft vocab {len(vocab)}" if vocab is not None else ""
        methods.append(dynamic(drafter, f"{name} (tuned)", setting, f"{dynamic_text(setting)} (tuned{extra})"))

    def with_tuned(key, name, drafter, fixed: Method, fallback_k: int | None = None):
        methods.append(fixed)
        if key in tuned:
            tuned_drafter, shape, saved = tuned[key]
            same = next((m for m in methods if m.name == name and m.shape == tuple(shape)), None)
            if same is not None and not saved.get("draft_vocab"):  # tuning kept a fixed row's shape: one row
                same.form += " (= tuned)"
                return
            kind = f"chain k={len(shape)}" if all(w == 1 for w in shape) else f"tree {shape}"
            vocab = f", draft vocab {saved['draft_vocab']}" if saved.get("draft_vocab") else ""
            methods.append(tree(tuned_drafter, shape, f"{name} (tuned)", f"{kind} (tuned{vocab})"))
        elif fallback_k is not None:
            methods.append(chain(drafter, fallback_k, name, f"chain k={fallback_k} (shape row; no tuned file)"))

    methods.append(Method("plain greedy (mini_llm)", "1 token / call", lambda p, n, t, s, trace: (
        generate(target, torch.tensor([p], device=target.device), n, temperature=t,
                 generator=torch.Generator(device=target.device).manual_seed(s))[0].tolist(),
        None)))
    ngram = NGramDrafter(target.cfg.vocab_size, device=target.device)
    methods.append(chain(ngram, CHAIN_K + 1, "n-gram / prompt lookup"))
    if greedy:
        look = LookaheadDrafter(target.cfg.vocab_size, device=target.device)
        methods.append(Method(
            "lookahead decoding", f"window {look.window}, {look.ngram}-grams, {look.candidates} candidates",
            lambda p, n, t, s, trace: _spec(lookahead_generate(target, p, n, drafter=look, trace=trace)), look))
    else:
        skipped.append("lookahead decoding: greedy only")
    if draft is not None:
        small = ModelDrafter(draft)
        methods.append(chain(small, CHAIN_K, "small model"))
        with_tuned("small", "small model", small, tree(small, SMALL_TREE, "small model"))
    else:
        skipped.append("small model: no draft model")
    quantized = QuantizedSelfDrafter(target)
    with_tuned("int4", "quantized self (INT4)", quantized, tree(quantized, SMALL_TREE, "quantized self (INT4)"))
    for kind, name, make, fallback, confidence_row in (
        ("medusa", "Medusa heads", lambda d, nm: tree(d, MEDUSA_TREE, nm), None, False),
        ("eagle", "EAGLE-1", lambda d, nm: tree(d, EAGLE_TREE, nm), FALLBACK_CHAIN_K, True),
        ("eagle", "EAGLE-2", dynamic, None, False),
        ("eagle3", "EAGLE-3 style", dynamic, None, True),
        ("mtp", "MTP module", lambda d, nm: chain(d, CHAIN_K, nm), FALLBACK_CHAIN_K, True),
    ):
        folder = heads_dir / kind
        if not (folder / "head.safetensors").is_file():
            skipped.append(f"{name}: no trained head in {folder}")
            continue
        drafter = load_head(folder, target)
        tuned_key = None if name == "EAGLE-2" else kind  # EAGLE-2's tuned rival is EAGLE-1's tuned fixed-branching tree
        fixed = make(drafter, name)
        if tuned_key is None:
            methods.append(fixed)
        else:
            with_tuned(tuned_key, name, drafter, fixed, fallback)
        if make is dynamic:  # EAGLE-2 and EAGLE-3: the tuned dynamic tree beside the fixed one
            tuned_dynamic_row(kind, name, fixed)
        if confidence_row:
            methods.append(confident_chain(kind, tuned[kind][0] if kind in tuned else drafter, f"{name}, confidence stop"))
    return methods, skipped


def hf_methods(target_path: Path, draft_path: Path | None, device: torch.device | str = "cpu") -> list[Method]:
    """transformers baselines on the same checkpoints and device: generate, assisted generation, prompt lookup."""
    from transformers import AutoModelForCausalLM

    with torch.device(device):  # built where it runs, whatever torch's default device is
        hf_target = AutoModelForCausalLM.from_pretrained(target_path, dtype=torch.float32).eval()
    hf_target.generation_config.eos_token_id = None  # fixed length, like the mini_llm runs

    def run(**kwargs) -> Runner:
        def go(p: list[int], n: int, t: float, s: int, trace: Trace):
            torch.manual_seed(s)
            with torch.inference_mode():
                out = hf_target.generate(torch.tensor([p], device=device),
                                         attention_mask=torch.ones(1, len(p), dtype=torch.long, device=device),
                                         max_new_tokens=n, do_sample=t > 0, temperature=t if t > 0 else None,
                                         top_k=None, top_p=None, pad_token_id=0, **kwargs)
            return out[0, len(p):].tolist(), None
        return go

    methods = [Method("transformers generate", "1 token / call", run())]
    if draft_path is not None:
        with torch.device(device):
            hf_draft = AutoModelForCausalLM.from_pretrained(draft_path, dtype=torch.float32).eval()
        hf_draft.generation_config.eos_token_id = None
        methods.append(Method("transformers assisted", "assistant_model=draft", run(assistant_model=hf_draft)))
    lookup = run(prompt_lookup_num_tokens=10)
    methods.append(Method("transformers prompt lookup", "prompt_lookup_num_tokens=10", lookup))
    return methods
