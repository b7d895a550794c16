"""Hands-on exercises and their judge (`python practice/judge.py`)."""
