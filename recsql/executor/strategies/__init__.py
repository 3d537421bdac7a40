"""Strategies that ride on the loop: a `protocols.IterationRunner` runs the next iterations
another way (roll-over's slices), a `protocols.Rider` rides on an iteration's action (heavy
keys, roll-over's counts), and the rest change how an iteration reads or starts: the adjacency
index, the key lookup, the join side, recovery from checkpoints, a refresh's seeded start."""
