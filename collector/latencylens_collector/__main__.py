"""``python -m latencylens_collector``: the ``latencylens`` command line."""

from latencylens_collector.cli.main import main

raise SystemExit(main())
