"""stackbook: choose an LLM inference stack with arithmetic first, then a fair measurement."""
import sys

__version__ = "0.1.0"

# jsonschema (under nbformat, papermill and jupytext) imports rfc3987_syntax for its "iri" format
# check, which builds about 35 Earley parsers at import: 1.4 s of every process and notebook kernel
# that reads a notebook, on a 2-core host. No schema stackbook validates uses that format, so the
# import is declined here and jsonschema leaves the format unchecked (python-jsonschema/jsonschema#1428).
sys.modules.setdefault("rfc3987_syntax", None)
