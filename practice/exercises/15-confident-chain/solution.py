import torch

from tree_spec import Drafter


def confident_chain(drafter: Drafter, context: list[int], root: int, k: int, theta: float) -> tuple[list[int], list[int]]:
    """-> (tokens, parents) of the chain: tokens[0] = root, parents = [-1, 0, 1, ...]."""
    tokens, parents, q = [root], [-1], 1.0
    for _ in range(k):
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])
        probs = logits[0].float().softmax(-1)
        token = int(probs.argmax())
        parents.append(len(tokens) - 1)
        tokens.append(token)
        q *= float(probs[token])
        if q < theta:
            break
    return tokens, parents
