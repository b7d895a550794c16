"""Orders each node's children from the lowest logit up."""
def build_tree(drafter, context, root, branching):
    tokens, parents, frontier = [root], [-1], [0]
    for width in branching:
        logits = drafter.next_logits(context, tokens, parents, frontier)
        new_frontier = []
        for node, row in zip(frontier, logits):
            for token in row.argsort()[-width:].tolist():
                new_frontier.append(len(tokens))
                tokens.append(token)
                parents.append(node)
        frontier = new_frontier
    return tokens, parents
