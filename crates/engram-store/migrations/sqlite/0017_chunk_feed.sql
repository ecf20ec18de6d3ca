-- Which feed this is and how far it was trimmed. An index saved on disk records the feed it
-- follows and the position it covers, and a restart trusts it only when the feed is this one
-- and still holds every change after that position (otherwise the index is built again).
CREATE TABLE chunk_feed (
    one     INTEGER PRIMARY KEY CHECK (one = 1),
    id      TEXT NOT NULL,
    trimmed INTEGER NOT NULL
);
-- What was trimmed before is unknown: as far as the feed ever went.
INSERT INTO chunk_feed (one, id, trimmed) VALUES (
    1,
    lower(hex(randomblob(16))),
    COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'), 0)
);
