"""Tests every sibling against the original p and q."""
import torch


def verify_tree(tokens, parents, draft_probs, target_probs, generator):
    path = [0]
    while True:
        node = path[-1]
        kids = [c for c in range(len(parents)) if parents[c] == node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node]
        accepted = None
        for c in kids:
            if torch.rand((), generator=generator).item() < min(1.0, (p[tokens[c]] / q[tokens[c]]).item()):
                accepted = c
                break
        if accepted is None:
            fix = torch.clamp(p - q, min=0)
            return path, int(torch.multinomial(fix / fix.sum(), 1, generator=generator))
        path.append(accepted)
