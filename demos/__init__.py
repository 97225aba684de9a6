"""Runnable programs, one idea each: ``python -m demos.<name>``."""
