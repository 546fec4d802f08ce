"""The schema rewriter (`SchemaRewriter`): a schema checked against what is enforced exactly and
rewritten, keyword by keyword, into the form one exact regex (or the JSON grammar) is built from."""
