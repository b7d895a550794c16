"""Takes each sibling's residual against the original draft row instead of the updated q."""
import torch


def verify_tree(tokens, parents, draft_probs, target_probs, generator):
    path = [0]
    while True:
        node = path[-1]
        kids = [i for i in range(1, len(parents)) if parents[i] == node]
        if not kids:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        p, q = target_probs[node], draft_probs[node].clone()
        for child in kids:
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            excess = (p - draft_probs[node]).clamp_min(0)
            p = excess / excess.sum() if excess.sum() > 0 else p
            q[x] = 0
            q = q / q.sum()
        else:
            return path, int(torch.multinomial(p, 1, generator=generator))
