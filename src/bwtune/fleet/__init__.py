"""Sharing one hardware group's sweep among its hosts (issue 25; docs/fleet.md says what is
built and what is not yet)."""
