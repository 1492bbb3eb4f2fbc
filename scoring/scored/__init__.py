"""Scoring a resource: the score_resource job and the device it computes on."""
