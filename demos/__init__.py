"""Runnable programs, one idea each: ``python -m minigrad.demos.<name>``."""
