"""Context-free grammar constraints: Lark and GBNF grammars compiled to a byte lexer DFA and LALR
tables, the per-lexer-state vocabulary index, and the searches that close an output in time.
The shipped grammars are in `grammars/`."""
