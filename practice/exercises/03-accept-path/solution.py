import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    """target_logits [n, V] -> accepted path as node ids, starting with the root 0."""
    predicted = target_logits.argmax(-1).tolist()
    accepted, depth, deepest = [True] * len(parents), [0] * len(parents), 0
    for i in range(1, len(parents)):
        parent = parents[i]
        depth[i] = depth[parent] + 1
        accepted[i] = accepted[parent] and tokens[i] == predicted[parent]
        if accepted[i] and depth[i] > depth[deepest]:  # strictly deeper: the lowest id wins among equals
            deepest = i
    path = [deepest]
    while path[-1] != 0:
        path.append(parents[path[-1]])
    return path[::-1]
