"""The correctness gate before any timing: canary checks at temperature 0 and the capability probe."""
