"""Scheduled logging jobs: the job file (``jobfile``), a run that resumes and publishes
a snapshot (``runner``), runs in parts (``parts``) and the snapshots (``snapshots``)."""
