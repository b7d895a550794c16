"""The benchmark's methods: every draft source in its natural form, its tuned shapes, and the transformers
baselines. A method runs one prompt: run(prompt, max_new_tokens, temperature, seed, trace) -> (new tokens,
SpecOutput or None); mini_llm's loops report their phases to `trace`.

`ROWS` is the table of mini_llm methods, one row each: its name, its draft source, its decoder and shape, and the
methods its saved tuning adds. A drafter joins the benchmark as one more row (and, for a new kind of source, a
line in `draft_source`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from mini_llm import Transformer, generate

from ..analysis.timing import TimeSplit
from ..analysis.tuned import CONFIDENCE_STOP, FIXED_DYNAMIC, TUNED_DIR, load_tuned
from ..core.contracts import SamplingParams, Trace
from ..core.output import SpecOutput
from ..decoding.chain import speculative_generate
from ..decoding.dynamic import dynamic_tree_speculative_generate
from ..decoding.lookahead import lookahead_generate
from ..decoding.tree import tree_speculative_generate
from ..drafters.base import Drafter
from ..drafters.lookahead import LookaheadDrafter
from ..drafters.ngram import NGramDrafter
from .dynamic_search import dynamic_text
from .named_drafters import HEAD_FOLDERS, make_drafter, tuned_drafter, tuned_dynamic

Runner = Callable[[list[int], int, float, int, Trace], tuple[list[int], SpecOutput | None]]
Tuned = tuple[Drafter, list[int], dict]  # a saved tuning: (drafter with its draft vocabulary, branching, the file)

CHAIN_K = 4
SMALL_TREE = (2, 2, 1, 1)
MEDUSA_TREE = (3, 2, 2, 1)
EAGLE_TREE = (3, 2, 1, 1, 1)
FALLBACK_CHAIN_K = 3  # shape rows for EAGLE-1 and MTP when no tuned shape was saved


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


@dataclass(frozen=True)
class Row:
    """One mini_llm method of the benchmark.

    drafter: its draft source (`draft_source`: a name of `named_drafters.DRAFTERS`, "n-gram" or "lookahead"; None:
    plain decoding), built once and shared by the rows that name it. decoder: "plain", "lookahead", "tree" (the
    branching `shape`; a chain when every width is 1) or "dynamic" (EAGLE-2 with `FIXED_DYNAMIC`, followed by the
    dynamic tree the tuner saved for the drafter, if any). tuned: followed by the shape the tuner saved for the
    drafter ("(tuned)"), or, when none was saved, by a chain of `fallback_k` drafts. confidence: followed by a
    confidence-stopped chain (the saved k and θ, else `CONFIDENCE_STOP`). greedy_only: skipped when sampling.
    """

    name: str
    drafter: str | None
    decoder: str
    shape: tuple[int, ...] = ()
    tuned: bool = False
    fallback_k: int | None = None
    confidence: bool = False
    greedy_only: bool = False


ROWS = (
    Row("plain greedy (mini_llm)", None, "plain"),
    Row("n-gram / prompt lookup", "n-gram", "tree", (1,) * (CHAIN_K + 1)),
    Row("lookahead decoding", "lookahead", "lookahead", greedy_only=True),
    Row("small model", "small-model", "tree", (1,) * CHAIN_K),
    Row("small model", "small-model", "tree", SMALL_TREE, tuned=True),
    Row("quantized self (INT4)", "int4-self", "tree", SMALL_TREE, tuned=True),
    Row("Medusa heads", "medusa", "tree", MEDUSA_TREE, tuned=True),
    Row("EAGLE-1", "eagle", "tree", EAGLE_TREE, tuned=True, fallback_k=FALLBACK_CHAIN_K, confidence=True),
    Row("EAGLE-2", "eagle", "dynamic"),  # its tuned rival is EAGLE-1's tuned fixed-branching tree
    Row("EAGLE-3 style", "eagle3", "dynamic", tuned=True, confidence=True),
    Row("MTP module", "mtp", "tree", (1,) * CHAIN_K, tuned=True, fallback_k=FALLBACK_CHAIN_K, confidence=True),
)


def _sampling(temperature: float, seed: int, device: torch.device) -> SamplingParams:
    """`temperature` with a generator seeded with `seed`, on the device whose tensors it samples."""
    return SamplingParams(temperature, generator=torch.Generator(device=device).manual_seed(seed))


def _spec(out: SpecOutput) -> tuple[list[int], SpecOutput]:
    return out.tokens, out


def draft_source(name: str, target: Transformer, draft: Transformer | None, heads_dir: Path) -> Drafter | str:
    """The draft source `name` of a row, or why there is none (the rows naming it are then skipped)."""
    if name == "n-gram":
        return NGramDrafter(target.cfg.vocab_size, device=target.device)
    if name == "lookahead":
        return LookaheadDrafter(target.cfg.vocab_size, device=target.device)
    if name == "small-model" and draft is None:
        return "no draft model"
    if name in HEAD_FOLDERS and not (heads_dir / HEAD_FOLDERS[name] / "head.safetensors").is_file():
        return f"no trained head in {heads_dir / HEAD_FOLDERS[name]}"
    return make_drafter(name, target, draft, heads_dir)


def plain_method(target: Transformer, name: str) -> Method:
    """mini_llm's `generate`, one token per call."""
    return Method(name, "1 token / call", lambda p, n, t, s, trace: (
        generate(target, torch.tensor([p], device=target.device), n, temperature=t,
                 generator=torch.Generator(device=target.device).manual_seed(s))[0].tolist(),
        None))


def lookahead_method(target: Transformer, drafter: LookaheadDrafter, name: str) -> Method:
    """Lookahead decoding (greedy only)."""
    form = f"window {drafter.window}, {drafter.ngram}-grams, {drafter.candidates} candidates"
    run = lambda p, n, t, s, trace: _spec(lookahead_generate(target, p, n, drafter=drafter, trace=trace))  # noqa: E731
    return Method(name, form, run, drafter)


def chain_method(target: Transformer, drafter: Drafter, k: int, name: str, form: str | None = None) -> Method:
    """Chain speculation, k drafts per step."""
    run = lambda p, n, t, s, trace: _spec(speculative_generate(  # noqa: E731
        target, drafter, p, n, k=k, sampling=_sampling(t, s, target.device), trace=trace))
    return Method(name, form or f"chain k={k}", run, drafter, chain=True, shape=(1,) * k)


def tree_method(target: Transformer, drafter: Drafter, branching: tuple[int, ...] | list[int], name: str,
                form: str | None = None) -> Method:
    """A fixed-branching tree; a chain (`chain_method`) when every width is 1."""
    if all(w == 1 for w in branching):
        return chain_method(target, drafter, len(branching), name, form and form.replace("tree", "chain"))
    branching = list(branching)
    run = lambda p, n, t, s, trace: _spec(tree_speculative_generate(  # noqa: E731
        target, drafter, p, n, branching=branching, sampling=_sampling(t, s, target.device), trace=trace))
    return Method(name, form or f"tree {branching}", run, drafter, shape=tuple(branching))


def dynamic_method(target: Transformer, drafter: Drafter, name: str, setting: dict = FIXED_DYNAMIC,
                   form: str | None = None) -> Method:
    """EAGLE-2's dynamic tree with `setting` ({depth, width, total_tokens}, and min_path_prob if it stops early)."""
    run = lambda p, n, t, s, trace: _spec(dynamic_tree_speculative_generate(  # noqa: E731
        target, drafter, p, n, **setting, sampling=_sampling(t, s, target.device), trace=trace))
    return Method(name, form or dynamic_text(setting), run, drafter)


def confident_method(target: Transformer, drafter: Drafter, saved: dict | None, name: str) -> Method:
    """A chain that stops when the draft is unsure: the k and θ in `saved` (the tuner's), else `CONFIDENCE_STOP`."""
    setting = dict(k=saved["k"], min_path_prob=saved["min_path_prob"]) if saved else CONFIDENCE_STOP
    run = lambda p, n, t, s, trace: _spec(speculative_generate(  # noqa: E731
        target, drafter, p, n, **setting, sampling=_sampling(t, s, target.device), trace=trace))
    form = (f"chain k<={setting['k']}, stops below path probability {setting['min_path_prob']}"
            + (" (tuned)" if saved else ""))
    return Method(name, form, run, drafter)  # chains of varying length: τ predicted like a tree's


def fixed_method(row: Row, target: Transformer, drafter: Drafter | None) -> Method:
    """The row's own method."""
    if row.decoder == "plain":
        return plain_method(target, row.name)
    if row.decoder == "lookahead":
        return lookahead_method(target, drafter, row.name)
    if row.decoder == "dynamic":
        return dynamic_method(target, drafter, row.name)
    return tree_method(target, drafter, row.shape, row.name)


def load_tuned_shapes(target: Transformer, draft: Transformer | None, heads_dir: Path, tuned_dir: Path,
                      model_name: str) -> tuple[dict[str, Tuned], list[str]]:
    """The saved tuning of every drafter a tuned row names (`python -m tree_spec.tools.tune`'s files), by drafter
    name, and notes on the files that could not be used. The drafter carries its tuned draft vocabulary, if any."""
    shapes, notes = {}, []
    for name in dict.fromkeys(row.drafter for row in ROWS if row.tuned):
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
        shapes[name] = (*found, load_tuned(name, tuned_dir))
    return shapes, notes


def tuned_methods(row: Row, target: Transformer, drafter: Drafter | None, methods: list[Method],
                  tuned: Tuned | None, dynamic: tuple[Drafter, dict] | None) -> list[Method]:
    """What a row adds after its own method (the last of `methods`, the methods so far): its saved shape (or its
    fallback chain), its saved dynamic tree (`dynamic`), its confidence-stopped chain. A saved configuration equal to
    one already there (same name and shape, or the fixed dynamic setting; full vocabulary) adds no method: that
    one's form reads "(= tuned)"."""
    own, added = methods[-1], []
    if row.tuned and tuned is not None:
        shaped, shape, saved = tuned
        same = next((m for m in methods if m.name == row.name and m.shape == tuple(shape)), None)
        if same is not None and not saved.get("draft_vocab"):
            same.form += " (= tuned)"
        else:
            kind = f"chain k={len(shape)}" if all(w == 1 for w in shape) else f"tree {shape}"
            vocab = f", draft vocab {saved['draft_vocab']}" if saved.get("draft_vocab") else ""
            added.append(tree_method(target, shaped, shape, f"{row.name} (tuned)", f"{kind} (tuned{vocab})"))
    elif row.tuned and row.fallback_k is not None:
        added.append(chain_method(target, drafter, row.fallback_k, row.name,
                                  f"chain k={row.fallback_k} (shape row; no tuned file)"))
    if dynamic is not None:
        grown, setting = dynamic
        if setting == FIXED_DYNAMIC and grown.draft_vocab is None:
            own.form += " (= tuned)"
        else:
            vocab = f", draft vocab {len(grown.draft_vocab)}" if grown.draft_vocab is not None else ""
            added.append(dynamic_method(target, grown, f"{row.name} (tuned)", setting,
                                        f"{dynamic_text(setting)} (tuned{vocab})"))
    if row.confidence:
        stop = tuned[2].get("confidence_stop") if tuned else None
        added.append(confident_method(target, tuned[0] if tuned else drafter, stop, f"{row.name}, confidence stop"))
    return added


def spec_methods(target: Transformer, draft: Transformer | None, heads_dir: Path, tuned_dir: Path | None = TUNED_DIR,
                 greedy: bool = True, model_name: str = "tiny-qwen3") -> tuple[list[Method], list[str]]:
    """mini_llm methods: each row of `ROWS` and the methods its saved tuning adds, in order; returns (methods,
    skipped methods with the reason)."""
    tuned, skipped = load_tuned_shapes(target, draft, heads_dir, tuned_dir, model_name) if tuned_dir else ({}, [])
    sources: dict[str, Drafter | str] = {}
    methods: list[Method] = []
    for row in ROWS:
        if row.greedy_only and not greedy:
            reason = "greedy only"
        else:
            if row.drafter is not None and row.drafter not in sources:
                sources[row.drafter] = draft_source(row.drafter, target, draft, heads_dir)
            drafter = sources.get(row.drafter)
            reason = drafter if isinstance(drafter, str) else None
        if reason is not None:
            if f"{row.name}: {reason}" not in skipped:  # rows sharing a name and a source: one note
                skipped.append(f"{row.name}: {reason}")
            continue
        methods.append(fixed_method(row, target, drafter))
        dynamic = (tuned_dynamic(row.drafter, target, heads_dir, tuned_dir, model_name)
                   if row.decoder == "dynamic" and tuned_dir else None)
        methods += tuned_methods(row, target, drafter, methods, tuned.get(row.drafter), dynamic)
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
