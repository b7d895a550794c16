"""Tries only the first child (lossless, but not recursive rejection)."""
import torch


def verify_tree(tokens, parents, draft_probs, target_probs, generator):
    path = [0]
    while True:
        node = path[-1]
        kids = [c for c in range(len(parents)) if parents[c] == node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node]
        x = tokens[kids[0]]
        if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
            path.append(kids[0])
            continue
        excess = torch.clamp(p - q, min=0)
        return path, int(torch.multinomial(excess / excess.sum() if excess.sum() > 0 else p, 1, generator=generator))
