"""Compares each draft's own probability with theta, not the path product."""
import torch


def confident_chain(drafter, context, root, k, theta):
    tokens, parents = [root], [-1]
    for _ in range(k):
        with torch.inference_mode():
            probs = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])[0].softmax(-1)
        token = int(probs.argmax())
        parents.append(len(tokens) - 1)
        tokens.append(token)
        if float(probs[token]) < theta:
            break
    return tokens, parents
