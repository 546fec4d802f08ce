"""Constraint compilation, matchers and token bitmasks, as a pipeline:

    Constraint ─ compiler.py (GrammarCompiler: cached, async `submit`)
     ├─ json_schema ─ json_schema.py
     │    schema/        $refs and bundles, merged branches, conditionals, oneOf, enum values
     │    rewrite/       SchemaRewriter: keyword -> handler, into what is enforced exactly
     │    regex/         leaves, patterns, formats, numbers as one exact regex
     │    json_grammar/  or, when that regex is too large, a CFG over JSON tokens ──────┐
     ├─ regex / choices / tool_calls (tool_calls.py: free text or the calls' grammar)   │
     │    index/         size budgets -> token automaton (outlines-core) -> RegexMatcher │
     │    unique/        UniqueGuard beside the automaton (uniqueItems, long counts)     │
     └─ lark / ebnf                                                                       │
          cfg/           Lark / GBNF -> lexer DFA + LALR tables -> CfgGrammar <──────────┘
    matcher.py (Matcher / CompiledGrammar protocols, GrammarError) -> bitmask.py (token rows)

Below them all: automata/ (lookaround NFA/DFA, write-out, code point sets, outlines-core probe),
tokenizer_info.py, matcher.py and bitmask.py. A subpackage imports only from those below it:
automata < regex < unique < index < schema < rewrite < cfg < json_grammar (tests/test_layering.py).

Submodules are imported on use, so `import radixgen.grammar` stays cheap.
"""
