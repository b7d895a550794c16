"""tree_spec.analysis.timeline: every target forward and drafter call timed, tokens committed per verify, plain == speculative."""
import matplotlib

from tests.spec_models import perturbed_copy, prompts, random_model
from tree_spec import speculative_generate
from tree_spec.ui.plots import draw_timeline
from tree_spec.analysis.timeline import pooled, record_plain, record_speculative


def test_timelines_account_for_every_call_and_token():
    matplotlib.use("Agg")
    target = random_model()
    draft = perturbed_copy(target)
    prompt = prompts(target.cfg.vocab_size, 1)[0]
    plain = record_plain(target, prompt, 20)
    spec = record_speculative(target, draft, prompt, 20, k=3)
    reference = speculative_generate(target, draft, prompt, 20, k=3)
    assert plain.tokens == spec.tokens == reference.tokens
    assert [s.kind for s in plain.spans] == ["prefill"] + ["decode"] * 19
    verifies = [s for s in spec.spans if s.kind == "verify"]
    assert [s.tokens - 1 for s in verifies] == reference.accepted_per_call
    assert sum(s.kind == "draft" for s in spec.spans) == reference.draft_calls
    assert 1 + sum(s.tokens for s in spec.committing) == len(spec.tokens) == 20
    for timeline in (plain, spec):
        starts = [s.start_ms for s in timeline.spans]
        assert starts == sorted(starts) and all(s.ms >= 0 for s in timeline.spans)
        assert timeline.ms_per_token() > 0
    assert "forward" not in target.__dict__  # the timing wrapper is removed
    fig = draw_timeline(plain, spec, n_tokens=10)
    assert len(fig.axes[0].get_yticks()) == 2


def test_pooled_sums_spans_and_tokens():
    target = random_model()
    prompt_a, prompt_b = prompts(target.cfg.vocab_size, 2)
    runs = [record_speculative(target, perturbed_copy(target), p, 12, k=2) for p in (prompt_a, prompt_b)]
    ms, count = pooled(runs, "verify")
    assert count == sum(len(r.output.accepted_per_call) for r in runs)
    assert abs(ms - sum(s.ms for r in runs for s in r.spans if s.kind == "verify")) < 1e-9
    elapsed, tokens = pooled(runs)
    assert tokens == 2 * 11 and abs(elapsed - sum(r.ms_per_token() * r.committed for r in runs)) < 1e-6
