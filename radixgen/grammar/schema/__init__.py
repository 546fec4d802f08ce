"""JSON Schema semantics the rewriter reads: references and bundles, merged branches, conditionals,
exclusions, kinds, oneOf exactness, enum/const values, and the schema as outlines-core takes it."""
