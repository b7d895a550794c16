"""Keeps the path probability as a float32 sum of log-probs (q == theta then reads as just below theta)."""
import math

import torch


def confident_chain(drafter, context, root, k, theta):
    tokens, parents, log_q = [root], [-1], torch.zeros(())
    for _ in range(k):
        with torch.inference_mode():
            logits = drafter.next_logits(context, tokens, parents, [len(tokens) - 1])
        logprobs = logits[0].float().log_softmax(-1)
        token = int(logprobs.argmax())
        parents.append(len(tokens) - 1)
        tokens.append(token)
        log_q = log_q + logprobs[token]
        if theta > 0 and float(log_q) < math.log(theta):
            break
    return tokens, parents
