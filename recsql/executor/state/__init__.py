"""The state: each recursive relation's rows as the loop keeps them (`relations`: set, bag,
min/max with payloads, sum/count with contributors) and the partitioned base copies kept across
statements (`bases`)."""
