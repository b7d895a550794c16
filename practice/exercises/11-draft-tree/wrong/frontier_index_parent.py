"""Uses the frontier position as the parent instead of the node id."""
def build_tree(drafter, context, root, branching):
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        logits = drafter.next_logits(context, tokens, parents, frontier)
        new_frontier = []
        for j in range(len(frontier)):
            for token in logits[j].topk(width).indices.tolist():
                new_frontier.append(len(tokens))
                tokens.append(token)
                parents.append(j)
        frontier = new_frontier
    return tokens, parents
