"""The model every arm serves: the embedded model's artifacts and its conversion, and model
geometry read from the catalog, a config.json or a GGUF."""
