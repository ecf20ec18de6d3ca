-- Per-key request budgets shared by every instance: the theoretical arrival time (GCRA) of each
-- key's next request, in microseconds.
CREATE TABLE rate_limits (
    prefix TEXT PRIMARY KEY,
    tat_us BIGINT NOT NULL
);
