-- Shortest routes, not just their cost: MIN_BY(metro.Src, ...) beside MIN(...) carries the
-- predecessor of each stop's best derivation. Where two routes are equally fast the smaller
-- predecessor wins (the minimum is taken over the tuple (Minutes, Pred)), so the answer is the
-- same on every run and engine. A second, UNION ALL recursion walks the predecessors back into
-- an array of stops.
CREATE TEMP VIEW metro USING csv OPTIONS (path 'data/metro.csv', header 'true', inferSchema 'true');

-- RaSQL's compact form of `trip` is the head `trip (Stop, min() AS Minutes, argmin(Minutes) AS
-- Pred)` with the term projecting `trip.Minutes + metro.Minutes, metro.Src` and no GROUP BY.
WITH RECURSIVE trip (Stop, Minutes, Pred) AS (
  SELECT 1, 0, 1
  UNION
  SELECT metro.Dst, MIN(trip.Minutes + metro.Minutes), MIN_BY(metro.Src, trip.Minutes + metro.Minutes)
  FROM trip, metro WHERE trip.Stop = metro.Src GROUP BY metro.Dst
),
route (Stop, At, Stops) AS (
  SELECT Stop, Stop, array(Stop) FROM trip
  UNION ALL
  SELECT route.Stop, trip.Pred, concat(array(trip.Pred), route.Stops)
  FROM route, trip WHERE route.At = trip.Stop AND trip.Pred <> trip.Stop
)
SELECT trip.Stop, trip.Minutes, trip.Pred, route.Stops
FROM trip JOIN route ON trip.Stop = route.Stop
WHERE route.At = 1
ORDER BY trip.Stop;
