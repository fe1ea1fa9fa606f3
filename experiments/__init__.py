"""hpctwin: experiments package."""
