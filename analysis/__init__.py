"""Tidy metrics -> tables (and, later, figures, claim verdicts and the report)."""
