"""Helpers that drive a real headless browser (Debian's chromium + chromedriver, via selenium)."""
