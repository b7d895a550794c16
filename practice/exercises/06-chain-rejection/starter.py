import torch


def verify_chain(draft_tokens: list[int], draft_probs: torch.Tensor, target_probs: torch.Tensor,
                 generator: torch.Generator) -> tuple[int, int]:
    """draft_probs [k, V], target_probs [k + 1, V] -> (n_accepted, next_token)."""
    raise NotImplementedError("accept or reject each draft token")
