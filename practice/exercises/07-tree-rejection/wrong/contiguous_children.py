"""Takes a node's children as the contiguous run of ids after its first child (true in BFS order only)."""
import torch


def verify_tree(tokens, parents, draft_probs, target_probs, generator):
    path = [0]
    while True:
        node = path[-1]
        first = next((i for i in range(len(parents)) if parents[i] == node), None)
        if first is None:
            return path, int(torch.multinomial(target_probs[node], 1, generator=generator))
        kids = [first]
        while kids[-1] + 1 < len(parents) and parents[kids[-1] + 1] == node:
            kids.append(kids[-1] + 1)
        p, q = target_probs[node], draft_probs[node].clone()
        for child in kids:
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            excess = (p - q).clamp_min(0)
            p = excess / excess.sum() if excess.sum() > 0 else p
            q[x] = 0
            q = q / q.sum() if q.sum() > 0 else q
        else:
            return path, int(torch.multinomial(p, 1, generator=generator))
