-- Per-key request budgets kept in the store, for stores shared by several instances: the
-- theoretical arrival time (GCRA) of each key's next request, in microseconds.
CREATE TABLE rate_limits (
    prefix TEXT PRIMARY KEY,
    tat_us INTEGER NOT NULL
);
