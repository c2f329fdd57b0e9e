"""Evaluation: metric tables and paired tests (report), live runs against a cluster (live), charts (plots)."""
