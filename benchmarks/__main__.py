"""Run every offline benchmark in one go: ``python -m benchmarks``."""

from . import factorised, mslr, quality, trees

for mod in (factorised, mslr, trees, quality):
    print(f"== {mod.__name__}", flush=True)
    mod.main()
