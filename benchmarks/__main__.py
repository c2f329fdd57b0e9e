"""Run every offline benchmark in one go: ``python -m benchmarks``."""

from . import factorised, mslr, trees

for mod in (factorised, mslr, trees):
    print(f"== {mod.__name__}", flush=True)
    mod.main()
