"""Constraint compilation, matchers and token bitmasks (the grammar issue)."""
