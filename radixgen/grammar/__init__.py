"""Constraint compilation, matchers and token bitmasks (the grammar issue).

    compiler.py       GrammarCompiler: Constraint -> CompiledGrammar (cached; async `submit`)
    matcher.py        the Matcher / CompiledGrammar protocols, bitmask and EOS conventions, GrammarError
    bitmask.py        allocate_bitmask, fill_all, apply_bitmask (Triton kernel on CUDA)
    json_schema.py    JSON Schema -> regex (schema_check / schema_rules / regex_leaves make it exact)
    schema_refs.py    local $refs: rewriting them, deep references hoisted into $defs
    token_index.py    regex -> token automaton (outlines-core) with per-state bitmask rows
    regex_matcher.py  RegexGrammar / RegexMatcher (json_schema, regex, choices)
    cfg*.py           Lark / EBNF grammars (kinds lark, ebnf)

Submodules are imported on use, so `import radixgen.grammar` stays cheap.
"""
