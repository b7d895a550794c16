"""The judge behind `python practice/judge.py`: catalog, subprocess worker, comparisons, references, progress."""
