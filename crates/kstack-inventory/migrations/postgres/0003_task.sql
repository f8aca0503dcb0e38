-- What a host is doing, for people: a compute host's lock that moves its instances off first
-- ("locking: ..."), or how the last one ended ("lock failed: ..."). NULL when nothing.
ALTER TABLE hosts ADD COLUMN task TEXT;
