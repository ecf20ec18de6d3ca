-- Push deliveries a connector received (a provider's webhook), by the provider's delivery id:
-- a delivery seen before is a replay and is refused. Rows older than a day are dropped as new
-- ones arrive; deleted with the connector.
CREATE TABLE connector_events (
    connector_id TEXT NOT NULL REFERENCES connectors (connector_id) ON DELETE CASCADE,
    delivery_id  TEXT NOT NULL,
    received_at  INTEGER NOT NULL,
    PRIMARY KEY (connector_id, delivery_id)
);
CREATE INDEX connector_events_by_time ON connector_events (connector_id, received_at);
