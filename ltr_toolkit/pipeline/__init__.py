"""The jobs users run, end to end: training from files (train), live cross-validation (crossval), the demo (demo)."""
