"""losses: torch ranking losses with one interface, loss(scores, labels, mask) -> scalar."""
