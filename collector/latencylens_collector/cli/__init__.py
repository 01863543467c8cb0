"""The ``latencylens`` command line."""
