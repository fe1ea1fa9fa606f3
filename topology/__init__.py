"""hpctwin: topology package."""
