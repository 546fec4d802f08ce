"""The @function DSL (the frontend-language issue)."""
