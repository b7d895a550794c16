"""Returns the accepted tokens instead of node ids."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    predicted = target_logits.argmax(-1).tolist()
    accepted, depth, deepest = [True] * len(parents), [0] * len(parents), 0
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
        accepted[i] = accepted[parents[i]] and tokens[i] == predicted[parents[i]]
        if accepted[i] and depth[i] > depth[deepest]:
            deepest = i
    path = [tokens[deepest]]
    node = deepest
    while node != 0:
        node = parents[node]
        path.append(tokens[node])
    return path[::-1]
