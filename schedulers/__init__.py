"""hpctwin: schedulers package."""
