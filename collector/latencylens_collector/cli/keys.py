"""``latencylens keys``: create, list and revoke API keys; and the local-mode check of ``serve``."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from typing import Any

from latencylens_collector.auth import KeyStore, LocalModeError, check_listen_address
from latencylens_collector.settings import Settings, env_var


def register(subparsers: Any) -> None:
    keys = subparsers.add_parser(
        "keys",
        help="create, list and revoke API keys (one project per key)",
        description="API keys for the collector. Once a key exists, every ingest and query request needs "
        "one ('Authorization: Bearer <key>' or 'x-api-key') and sees only its key's project.",
    )
    actions = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a key and print it (once)")
    create.add_argument("--project", required=True, help="project the key writes to and reads from")
    create.add_argument("--name", default="", help="a note on who or what uses the key")
    _metadata_option(create)
    create.set_defaults(handler=_create)

    listing = actions.add_parser("list", help="list keys (ids, projects, names; never secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _metadata_option(listing)
    listing.set_defaults(handler=_list)

    revoke = actions.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id", metavar="KEY_ID", help="the id shown by 'keys list' (ll_<id>_...)")
    _metadata_option(revoke)
    revoke.set_defaults(handler=_revoke)


def _metadata_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metadata-url",
        help=f"SQLAlchemy URL of the metadata database (env {env_var('metadata_url')}; "
        "default sqlite:///./.latencylens/metadata.db)",
    )


def _store(args: argparse.Namespace) -> KeyStore:
    return KeyStore(Settings(metadata_url=args.metadata_url).metadata_url)


def _create(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        key, raw = store.create(args.project, args.name)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(raw)
    print(
        f"created key {key.key_id} for project {key.project}; this is the only time it is shown",
        file=sys.stderr,
    )
    return 0


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
            "created_at": _iso(key.created_at_ns),
            "revoked_at": _iso(key.revoked_at_ns) if key.revoked_at_ns is not None else None,
        }
        for key in keys
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no keys: the collector runs in local mode (project 'default', loopback only)")
        return 0
    print(f"{'KEY ID':<14}{'PROJECT':<20}{'STATUS':<9}{'CREATED (UTC)':<22}NAME")
    for row in rows:
        status = "revoked" if row["revoked_at"] else "active"
        print(f"{row['key_id']:<14}{row['project']:<20}{status:<9}{row['created_at']:<22}{row['name']}")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        revoked = store.revoke(args.key_id)
    finally:
        store.close()
    if not revoked:
        print(f"error: no active key with id {args.key_id}", file=sys.stderr)
        return 1
    print(f"revoked key {args.key_id}")
    return 0


def serve_refusal(settings: Settings) -> str | None:
    """Why ``serve`` must not start with these settings (keyless on a public interface), or None."""
    store = KeyStore(settings.metadata_url)
    try:
        check_listen_address(settings.host, store.enabled(), settings.allow_unauthenticated)
    except LocalModeError as exc:
        return str(exc)
    finally:
        store.close()
    return None


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
