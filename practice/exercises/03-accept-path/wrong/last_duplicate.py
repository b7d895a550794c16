"""Walks down greedily and, of two children with the same accepted token, steps into the last one."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    path = [0]
    while True:
        node = path[-1]
        predicted = int(target_logits[node].argmax())
        match = None
        for child in range(1, len(parents)):
            if parents[child] == node and tokens[child] == predicted:
                match = child  # keeps overwriting: ends with the last matching child
        if match is None:
            return path
        path.append(match)
