"""On a cluster, every statement carries ``distributed_product_mode = 'global'``: the reconciler's
and the engine path's reads select traces by a subquery of another ``Distributed`` table, which a
cluster of more than one shard refuses by default. A single server gets no such setting. No cluster
runs here: the setting's name and value are checked against the engine itself."""

from __future__ import annotations

from latencylens_collector.storage.store import Store, server_settings


def test_only_a_cluster_gets_the_setting() -> None:
    assert server_settings(None) == {}
    assert server_settings("main") == {"distributed_product_mode": "global"}


def test_the_engine_takes_the_setting_as_the_client_sends_it(store: Store) -> None:
    asked = store.client.query(
        "SELECT getSetting('distributed_product_mode') AS mode", settings=server_settings("main")
    )
    (row,) = asked.named_results()
    assert row["mode"] == "global"
    (default,) = store.query("SELECT getSetting('distributed_product_mode') AS mode")
    assert default["mode"] == "deny"  # what a cluster would refuse those reads with
