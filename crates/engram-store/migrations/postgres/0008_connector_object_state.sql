-- What a provider keeps of each synced object between passes (the web crawler: a page's
-- validators and links, so an unchanged page is answered 304 and still crawled through).
ALTER TABLE connector_objects ADD COLUMN state TEXT NOT NULL DEFAULT '';
