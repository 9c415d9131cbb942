"""One piece of work at a time: the turn claim, the turn runner, the bookkeeping of the work
holding the claim, and the tool admission that decides each call before its body runs."""
