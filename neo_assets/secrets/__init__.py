"""Secrets never leave the repo: the files never read and the chunks never embedded."""
