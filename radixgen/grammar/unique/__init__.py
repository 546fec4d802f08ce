"""uniqueItems and long counts kept beside the regex automaton: `UniqueGuard` (guard), its JSON
walk, the item values it can keep unique, its per-tokenizer tables, and the guarded matcher."""
