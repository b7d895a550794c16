import torch


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """[V], [V] -> norm(max(0, p - q)); p itself where that is all zero."""
    excess = (p - q).clamp_min(0)
    mass = excess.sum()
    return excess / mass if mass > 0 else p


def verify_tree(tokens: list[int], parents: list[int], draft_probs: torch.Tensor,
                target_probs: torch.Tensor, generator: torch.Generator) -> tuple[list[int], int]:
    """draft_probs, target_probs [n, V] -> (accepted path as node ids from 0, next_token)."""
    children: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        children[parents[i]].append(i)
    path = [0]
    while children[path[-1]]:
        node = path[-1]
        p, q = target_probs[node], draft_probs[node].clone()
        for child in children[node]:
            x = tokens[child]
            if torch.rand((), generator=generator).item() * q[x].item() < p[x].item():
                path.append(child)
                break
            p = residual(p, q)
            q[x] = 0
            q = q / q.sum() if q.sum() > 0 else q
        else:
            return path, int(torch.multinomial(p, 1, generator=generator))
    return path, int(torch.multinomial(target_probs[path[-1]], 1, generator=generator))
