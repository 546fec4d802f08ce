"""A regex as a token automaton: size budgets checked first, the token index with its per-state
bitmask rows, and the regex matcher over it."""
