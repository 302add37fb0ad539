"""AttuneBench: the benchmark core (instrument, formats, scoring, replay), free of Django."""

__version__ = "0.1.0"
