-- Whether each host's node has the host's labels and lock state: pending (a change not pushed
-- yet, or no node of that name yet), synced, or failed (sync_reason says why). sync_generation
-- counts the writes that change what the node should have, so a slow sync never records an
-- outcome for a state it did not push.
ALTER TABLE hosts ADD COLUMN sync_state TEXT NOT NULL DEFAULT 'pending'
    CHECK (sync_state IN ('pending', 'synced', 'failed'));
ALTER TABLE hosts ADD COLUMN sync_reason TEXT;
ALTER TABLE hosts ADD COLUMN sync_changed_at TEXT;
ALTER TABLE hosts ADD COLUMN sync_generation BIGINT NOT NULL DEFAULT 0;
