-- Which feed this is: an index an instance saved on disk records the feed it follows and the
-- position it covers, and a restart trusts it only when the feed is this one and still holds
-- every change after that position (`chunk_log_trimmed.through`).
ALTER TABLE chunk_log_trimmed ADD COLUMN feed TEXT;
UPDATE chunk_log_trimmed SET feed = md5(random()::text || clock_timestamp()::text);
ALTER TABLE chunk_log_trimmed ALTER COLUMN feed SET NOT NULL;
