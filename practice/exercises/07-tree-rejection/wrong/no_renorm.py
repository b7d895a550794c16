"""Leaves the residual unnormalized before the next sibling is tried."""
import torch


def verify_tree(tokens, parents, draft_probs, target_probs, generator):
    path = [0]
    while True:
        node = path[-1]
        kids = [c for c in range(len(parents)) if parents[c] == node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node].clone()
        for c in kids:
            x = tokens[c]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(c)
                break
            excess = torch.clamp(p - q, min=0)
            if excess.sum() > 0:
                p = excess  # multinomial normalizes, but min(1, p/q) for the next child does not
            q[x] = 0
            q = q / q.sum()
        else:
            return path, int(torch.multinomial(p, 1, generator=generator))
