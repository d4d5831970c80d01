"""The merge-on-read fold the mirror and the history share: `reference` (the fold in pure Python,
the model), `arrow_fold` (the same over Arrow), `events` (the fold's events and `fold_rows`),
`frames` + `tombstones` + `advanced` (a group's changes as events), `batch_reader` (a micro-batch
read and typed) and `delta_tables` (the Delta tables' schema, partitions and MERGE)."""
