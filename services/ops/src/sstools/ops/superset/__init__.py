"""Talking to Superset: one client per environment, and the operations built on its REST API."""
