"""`campaign serve`: a read-only web view of a campaign database (see docs/teams.md)."""
