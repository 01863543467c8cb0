"""ClickHouse storage: the store client, migrations, DDL and the hourly rollup."""
