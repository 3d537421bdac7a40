"""The Spark loop: a statement's session (`session`), the loop every recursive group runs
(`fixpoint.GroupRun`, the protocols strategies see in `protocols`), an iteration's one Spark
action (`action`), its SQL (`spark_sql`), its statistics, limits and failures."""
