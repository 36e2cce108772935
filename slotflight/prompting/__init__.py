"""The prompt a plan sends, rendered from the templates in ``prompts/``."""
