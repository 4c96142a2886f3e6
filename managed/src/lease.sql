CREATE TABLE fencing.leases (name text PRIMARY KEY, holder text, token fencing.fence, granted_at timestamptz, expires_at timestamptz, owner regrole NOT NULL);
