"""hpctwin: datasets package."""
