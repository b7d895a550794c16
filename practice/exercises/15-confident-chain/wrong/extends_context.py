"""Appends each draft to the caller's context list instead of keeping it in the chain only."""
import torch


def confident_chain(drafter, context, root, k, theta):
    tokens, parents, q = [root], [-1], 1.0
    for _ in range(k):
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])
        probs = logits[0].float().softmax(-1)
        token = int(probs.argmax())
        parents.append(len(tokens) - 1)
        tokens.append(token)
        context.append(token)
        q *= float(probs[token])
        if q < theta:
            break
    return tokens, parents
