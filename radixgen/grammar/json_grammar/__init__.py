"""JSON Schemas too large for one regex, as a context-free grammar over JSON tokens compiled to the
CFG matcher."""
