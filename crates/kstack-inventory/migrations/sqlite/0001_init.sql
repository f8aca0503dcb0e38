-- Hosts and labels (StarlingX sysinv label table: created_at, updated_at, deleted_at, id, uuid, host_id, label_key, label_value).
CREATE TABLE hosts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    hostname TEXT NOT NULL UNIQUE,
    personality TEXT NOT NULL CHECK (personality IN ('controller', 'compute', 'storage')),
    administrative TEXT NOT NULL CHECK (administrative IN ('locked', 'unlocked')),
    operational TEXT NOT NULL CHECK (operational IN ('enabled', 'disabled')),
    created_at TEXT NOT NULL,
    updated_at TEXT
);

CREATE TABLE labels (
    created_at TEXT NOT NULL,
    updated_at TEXT,
    deleted_at TEXT,
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid TEXT NOT NULL UNIQUE,
    host_id INTEGER NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    label_key TEXT NOT NULL,
    label_value TEXT NOT NULL
);

CREATE UNIQUE INDEX labels_live_key ON labels (host_id, label_key) WHERE deleted_at IS NULL;
