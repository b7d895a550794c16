"""Runs model.forward once per node instead of one tree forward."""
import torch


def tree_logits(model, prefix, tokens, parents):
    """Calls model.forward directly (no __call__, so no module hooks on the model itself), once per node."""
    rows = []
    with torch.inference_mode():
        for i in range(len(tokens)):
            path, node = [], i
            while node >= 0:
                path.insert(0, tokens[node])
                node = parents[node]
            rows.append(model.forward(torch.tensor([prefix + path], device=model.device))[0, -1])
    return torch.stack(rows)
