"""After every child is rejected, samples from target_probs[node] instead of the final p."""
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
            if torch.rand((), generator=generator).item() < min(1.0, (p[x] / q[x]).item()):
                path.append(c)
                break
            excess = torch.clamp(p - q, min=0)
            p = excess / excess.sum()
            q[x] = 0
            q = q / q.sum()
        else:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
