"""Drafters, token trees, grammar pruning and verification (the speculative-decoding issue)."""
