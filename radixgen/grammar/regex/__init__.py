"""JSON Schema leaves and patterns as exact regexes in outlines-core's syntax: patterns (classes,
properties, dialects, open ends, lookarounds, lengths), formats, number ranges and multiples."""
