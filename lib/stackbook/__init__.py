"""stackbook: choose an LLM inference stack with arithmetic first, then a fair measurement."""
__version__ = "0.1.0"
