"""Pure request analysis: span records, conventions, attribution, explanations (no I/O)."""
