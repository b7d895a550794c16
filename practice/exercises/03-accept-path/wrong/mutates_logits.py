"""Masks the accepted token out of the caller's target_logits (in place) while walking."""
import torch


def accept_greedy(tokens: list[int], parents: list[int], target_logits: torch.Tensor) -> list[int]:
    path = [0]
    while True:
        node = path[-1]
        best = int(target_logits[node].argmax())
        match = next((c for c in range(1, len(parents)) if parents[c] == node and tokens[c] == best), None)
        if match is None:
            return path
        target_logits[node, best] = float("-inf")
        path.append(match)
