"""``latencylens keys``: create, list and revoke API keys in the metadata database.

Keys are managed where the service's metadata database is (``--metadata-url``), not through the
service's HTTP API: whoever can write that database administers the collector, and the API has no
credential above a project's key that could allow it. So ``keys`` takes no ``--url``.

The first key switches every collector on that database to keys-required at once (callers without
a key get 401 and their spans are dropped), so creating it is an explicit step: ``keys create``
says so and asks, and scripts pass ``--yes``. Later keys change nothing for existing callers.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from latencylens_collector.auth import KeyStore
from latencylens_collector.auth.store import check_project_name
from latencylens_collector.cli.errors import FAILED, USAGE, CliError
from latencylens_collector.cli.output import Column, Table, note, render, show, show_json, utc
from latencylens_collector.cli.startup import metadata_options, settings_or_exit
from latencylens_collector.settings import env_var, redact_dsn

LOCAL_MODE = "no keys: the collector runs in local mode (project 'default', loopback only)"
NOT_OVER_HTTP = (
    "keys are managed in the metadata database, not through the service: run 'latencylens keys' "
    f"where that database is reachable and pass --metadata-url (or set {env_var('metadata_url')})"
)


def register(subparsers: Any) -> None:
    keys = subparsers.add_parser(
        "keys",
        help="create, list and revoke API keys (one project per key)",
        description="API keys, kept in the metadata database (not managed through the service's "
        "API, so there is no --url). Once a key exists, every ingest and query request needs one "
        "('Authorization: Bearer <key>' or 'x-api-key') and sees only its key's project.",
    )
    actions = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)

    create = actions.add_parser(
        "create",
        help="create a key and print it (once)",
        description="Create a key for a project and print it; it is shown only this once. The "
        "first key makes every collector on this metadata database require keys at once: callers "
        "without one get 401 and their spans are dropped. Give each app its key first; "
        "'create' asks before making the first key (--yes for scripts).",
    )
    create.add_argument("--project", required=True, help="project the key writes to and reads from")
    create.add_argument("--name", default="", help="a note on who or what uses the key")
    create.add_argument(
        "--yes", action="store_true", help="do not ask before the first key turns on enforcement"
    )
    _common_options(create)
    create.set_defaults(handler=_create)

    listing = actions.add_parser("list", help="list keys (ids, projects, names; never secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _common_options(listing)
    listing.set_defaults(handler=_list)

    revoke = actions.add_parser(
        "revoke",
        help="revoke a key by its id",
        description="Revoke a key: its callers get 401 from now on. Revoking the last key does not "
        "turn enforcement off.",
    )
    revoke.add_argument("key_id", metavar="KEY_ID", help="the id shown by 'keys list' (ll_<id>_...)")
    _common_options(revoke)
    revoke.set_defaults(handler=_revoke)


def _common_options(parser: argparse.ArgumentParser) -> None:
    metadata_options(parser)
    # Accepted only to answer it with why keys do not go through the service.
    parser.add_argument("--url", help=argparse.SUPPRESS)


def _store(args: argparse.Namespace) -> KeyStore:
    if args.url:
        raise CliError(NOT_OVER_HTTP, USAGE)
    return KeyStore(settings_or_exit(metadata_url=args.metadata_url, data_dir=args.data_dir).metadata_url)


def _create(args: argparse.Namespace) -> int:
    try:
        check_project_name(args.project)
    except ValueError as exc:
        raise CliError(str(exc), USAGE) from None
    store = _store(args)
    try:
        if not store.enabled() and not args.yes:
            _confirm_enforcement(redact_dsn(store.url))
        key, raw = store.create(args.project, args.name)
    finally:
        store.close()
    show(raw)
    note(f"created key {key.key_id} for project {key.project}; this is the only time it is shown")
    return 0


def _confirm_enforcement(where: str) -> None:
    """Ask before the first key turns enforcement on; without a terminal, demand ``--yes``."""
    consequence = (
        "the first API key makes every collector using this metadata database require a key at "
        "once: apps without one get 401 and their spans are dropped"
    )
    if not sys.stdin.isatty():
        raise CliError(f"{consequence}; run again with --yes to create it", USAGE)
    note(f"This is the first API key in {where}.")
    note(f"Creating it: {consequence}.")
    note("Give each app its key (LATENCYLENS_API_KEY) as soon as it is created.")
    print("Create it and require keys from now on? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise CliError("no key created: enforcement stays off", USAGE)


def _list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        keys = store.list()
    finally:
        store.close()
    rows = [
        {
            "key_id": key.key_id,
            "project": key.project,
            "name": key.name,
            "created_at": utc(key.created_at_ns),
            "revoked_at": utc(key.revoked_at_ns) if key.revoked_at_ns is not None else None,
        }
        for key in keys
    ]
    if args.json:
        show_json(rows)
        return 0
    if not rows:
        show(LOCAL_MODE)
        return 0
    table = Table(
        "API keys (every ingest and query request needs one)",
        [
            Column("key id"),
            Column("project"),
            Column("status"),
            Column("created"),
            Column("name", wraps=True),
        ],
    )
    for row in rows:
        table.add(
            row["key_id"],
            row["project"],
            "revoked" if row["revoked_at"] else "active",
            row["created_at"],
            row["name"] or "-",
        )
    show(render(table))
    return 0


def _revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        revoked = store.revoke(args.key_id)
    finally:
        store.close()
    if not revoked:
        raise CliError(f"no active key with id {args.key_id}", FAILED)
    show(f"revoked key {args.key_id}")
    return 0
