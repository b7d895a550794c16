"""The judge behind `python practice/judge.py`: catalog, worker processes, comparisons, references, progress."""
