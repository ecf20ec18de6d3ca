-- Whether the restrictions of some objects of a resource could not be read at the last pass
-- (`page_acl_warning` in a connector's status); empty when they all were.
ALTER TABLE connector_resources ADD COLUMN page_acl_warning TEXT NOT NULL DEFAULT '';
