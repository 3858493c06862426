"""Models of the staff console (none yet)."""
