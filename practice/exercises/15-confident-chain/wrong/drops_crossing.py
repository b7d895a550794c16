"""Drops the draft that takes q below theta instead of keeping it."""
import torch


def confident_chain(drafter, context, root, k, theta):
    tokens, parents, q = [root], [-1], 1.0
    for _ in range(k):
        with torch.inference_mode():
            probs = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])[0].softmax(-1)
        token = int(probs.argmax())
        q *= float(probs[token])
        if q < theta:
            break
        parents.append(len(tokens) - 1)
        tokens.append(token)
    return tokens, parents
