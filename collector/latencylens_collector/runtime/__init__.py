"""Process-wide facilities: the Prometheus registry and the background scheduler."""
