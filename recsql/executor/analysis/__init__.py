"""The analysis stage: every recursive group's head typed before anything runs (`stage`), by
Spark's type rules (`spark_types`) and, for branches Spark need not analyse, by recsql's own
(`plain_types`). Empty on purpose: the endgame imports the type rules, and a package that loaded
the stage on import would import the endgame back."""
