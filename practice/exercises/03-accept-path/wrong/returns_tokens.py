"""Returns the accepted tokens instead of node ids."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    predicted = target_logits.argmax(-1).tolist()
    node, accepted = 0, [tokens[0]]
    while True:
        kids = [c for c in range(1, len(tokens)) if parents[c] == node and tokens[c] == predicted[node]]
        if not kids:
            return accepted
        node = kids[0]
        accepted.append(tokens[node])
