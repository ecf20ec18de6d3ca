-- What a key may do: a JSON array of scope names, closed under implication (write brings read,
-- admin brings both). Keys made before scopes existed hold all three.
ALTER TABLE api_keys ADD COLUMN scopes JSONB NOT NULL DEFAULT '["read","write","admin"]';
