"""Automation profiles, semantic escalation, guards and pre-flight checks (issue 4)."""
