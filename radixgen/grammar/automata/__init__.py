"""Automata under the regex layer: code point sets, the lookaround NFA/DFA, automata written back
out as regexes, and outlines-core byte automata built in a bounded helper process (probe)."""
