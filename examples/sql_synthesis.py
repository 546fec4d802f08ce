"""Text-to-SQL under a grammar: the output is always a parsable SELECT statement.

By default the server's shipped grammar is used by name (`lark="sql"`); `--inline` sends the
small Lark grammar below instead (a SELECT/FROM/WHERE/ORDER BY/LIMIT subset).

    python examples/sql_synthesis.py --question "Which customers live in Paris?"
"""

from __future__ import annotations

import argparse

import radixgen as rg

SCHEMA = """CREATE TABLE customers (id INTEGER, name TEXT, city TEXT, signup_date DATE);
CREATE TABLE orders (id INTEGER, customer_id INTEGER, total REAL, created_at DATE);"""

SELECT_GRAMMAR = r"""
start: "SELECT " columns " FROM " NAME where? order? limit? ";"
columns: "*" | column (", " column)*
column: NAME | NAME "." NAME | FUNC "(" (NAME | "*") ")"
where: " WHERE " condition ((" AND " | " OR ") condition)*
condition: column OP value
value: NUMBER | STRING | column
order: " ORDER BY " column (" ASC" | " DESC")?
limit: " LIMIT " NUMBER
FUNC: "COUNT" | "SUM" | "AVG" | "MIN" | "MAX"
OP: " = " | " < " | " > " | " <= " | " >= " | " != "
NAME: /[a-z_][a-z0-9_]*/
NUMBER: /[0-9]+(\.[0-9]+)?/
STRING: /'[^']*'/
"""


@rg.function
def text_to_sql(s, question, grammar, max_tokens):
    s += rg.system("You translate questions into one SQLite query over this schema:\n" + SCHEMA)
    s += rg.user(question)
    s += rg.assistant(rg.gen("sql", max_tokens=max_tokens, temperature=0, lark=grammar))


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000", help="a running server (make serve)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--question", default="Which customers live in Paris?")
    p.add_argument("--inline", action="store_true", help="send the grammar above instead of the name 'sql'")
    args = p.parse_args(argv)
    state = text_to_sql.run(question=args.question, max_tokens=args.max_tokens,
                            grammar=SELECT_GRAMMAR if args.inline else "sql",
                            backend=rg.RuntimeEndpoint(args.url, api_key=args.api_key))
    print(state["sql"])
    return state["sql"]


if __name__ == "__main__":
    main()
