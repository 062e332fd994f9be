"""VideoSeek: video reasoning as a multi-turn decision process."""

__version__ = "0.1.0"
