"""Runs one forward per node's path instead of one tree forward."""
import torch


def tree_logits(model, prefix, tokens, parents):
    rows = []
    with torch.inference_mode():
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path.insert(0, tokens[node])
                node = parents[node]
            rows.append(model(torch.tensor([prefix + path]))[0, -1])
    return torch.stack(rows)
