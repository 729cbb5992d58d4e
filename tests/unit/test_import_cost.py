"""A process that imports stackbook reads notebooks without building jsonschema's IRI parsers,
and jsonschema's other format checks still run."""
import subprocess
import sys

PROBE = """
import stackbook, nbformat, jsonschema, sys
assert sys.modules.get("rfc3987_syntax") is None, "the IRI grammar was imported"
checker = jsonschema.FormatChecker()
assert "iri" not in checker.checkers and "email" in checker.checkers
assert not checker.conforms("not-an-email", "email") and checker.conforms("a@b.org", "email")
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
nbformat.validate(nb)
nb.cells[0]["execution_count"] = "one"
try:
    nbformat.validate(nb)
except nbformat.ValidationError:
    print("validated")
"""


def test_notebooks_are_read_and_validated_without_the_iri_grammar():
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "validated"


def test_without_stackbook_the_grammar_is_what_jsonschema_imports():
    """The decline is stackbook's own: jsonschema alone still imports the IRI check here, so the
    test above fails if stackbook stops declining it."""
    r = subprocess.run([sys.executable, "-c", "import jsonschema, sys; print('rfc3987_syntax' in sys.modules "
                        "and sys.modules['rfc3987_syntax'] is not None)"], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "True", r.stderr[-2000:]
