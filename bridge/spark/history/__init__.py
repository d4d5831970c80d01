"""The history job (SCD type 2): `writer` (`HistoryWriter`, `as_of`) -> `arrow` (`mapInArrow`) +
`advance` -> `versions` (on the reference fold)."""
