-- test/demo/schema.sql: the shop in which the incident plays.
--
-- One schema per scene, named after it, each with the same three tables, so
-- that the runs do not disturb each other and the final comparison can read
-- them all:
--
--   accounts  the merchant's balance, debited by every refund paid out
--   refunds   refund r-1: 25.00 owed to a customer, still pending
--   ledger    append-only bookings, one row per payout
--
-- Scene "fenced": refunds has a fence column, advanced by every write with
-- fencing.advance(), so a write carrying an older token than the last one
-- accepted is rejected (SF001).  Scene "unfenced": the same shop without it.
-- Scene "guarded": the same shop, its tables protected by fencing.protect()
-- (see its section below).  Scenes "leased" and "lease_guarded": the guarded
-- shop again, the tokens coming from fencing.lease_acquire() instead of
-- Redis; "lease_guarded" protected with the lease as well.  Scene "idem":
-- refund r-2, paid out through a payment provider under an idempotency key.

CREATE EXTENSION fencing;

------------------------------------------------------------------------------
-- fenced
------------------------------------------------------------------------------
CREATE SCHEMA fenced;

CREATE TABLE fenced.accounts (
    id              text PRIMARY KEY,
    balance_cents   bigint NOT NULL
);

CREATE TABLE fenced.refunds (
    id              text PRIMARY KEY,
    account         text NOT NULL REFERENCES fenced.accounts,
    amount_cents    bigint NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    paid_by         text,
    fence           fencing.fence           -- the newest token that wrote the row
);

CREATE TABLE fenced.ledger (
    id              bigserial PRIMARY KEY,
    account         text NOT NULL,
    refund          text NOT NULL,
    amount_cents    bigint NOT NULL,
    booked_by       text NOT NULL,
    token           text NOT NULL,
    booked_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO fenced.accounts VALUES ('merchant-1', 10000);
INSERT INTO fenced.refunds (id, account, amount_cents) VALUES ('r-1', 'merchant-1', 2500);

------------------------------------------------------------------------------
-- unfenced: the same shop, no fence column, nothing to check tokens against
------------------------------------------------------------------------------
CREATE SCHEMA unfenced;

CREATE TABLE unfenced.accounts (
    id              text PRIMARY KEY,
    balance_cents   bigint NOT NULL
);

CREATE TABLE unfenced.refunds (
    id              text PRIMARY KEY,
    account         text NOT NULL REFERENCES unfenced.accounts,
    amount_cents    bigint NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    paid_by         text
);

CREATE TABLE unfenced.ledger (
    id              bigserial PRIMARY KEY,
    account         text NOT NULL,
    refund          text NOT NULL,
    amount_cents    bigint NOT NULL,
    booked_by       text NOT NULL,
    token           text NOT NULL,
    booked_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO unfenced.accounts VALUES ('merchant-1', 10000);
INSERT INTO unfenced.refunds (id, account, amount_cents) VALUES ('r-1', 'merchant-1', 2500);

------------------------------------------------------------------------------
-- guarded: the careless code of "unfenced", plus one line per transaction
-- (SET LOCAL fencing.token), in a shop whose tables the guard protects:
--
--   refunds  row scope: each row's fence column holds the newest token
--            that wrote it, so a stale UPDATE of r-1 is rejected;
--   ledger   key scope, per account: the newest token that wrote any row of
--            an account is kept in fencing.scopes, so a stale INSERT of a
--            new booking is rejected too (row scope could not see it: a new
--            row has no fence of its own to lose to).
--
-- accounts is not protected: the debit rides in the ledger's transaction
-- (scenes/guarded.1.ledger.sql), after the INSERT the guard checks.
------------------------------------------------------------------------------
CREATE SCHEMA guarded;

CREATE TABLE guarded.accounts (
    id              text PRIMARY KEY,
    balance_cents   bigint NOT NULL
);

CREATE TABLE guarded.refunds (
    id              text PRIMARY KEY,
    account         text NOT NULL REFERENCES guarded.accounts,
    amount_cents    bigint NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    paid_by         text,
    fence           fencing.fence           -- written by the guard
);

CREATE TABLE guarded.ledger (
    id              bigserial PRIMARY KEY,
    account         text NOT NULL,
    refund          text NOT NULL,
    amount_cents    bigint NOT NULL,
    booked_by       text NOT NULL,
    token           text NOT NULL,
    booked_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    fence           fencing.fence           -- written by the guard
);

INSERT INTO guarded.accounts VALUES ('merchant-1', 10000);
INSERT INTO guarded.refunds (id, account, amount_cents) VALUES ('r-1', 'merchant-1', 2500);

-- after the rows above: the counters in fencing.stats see only the workers
SELECT fencing.protect('guarded.refunds');
SELECT fencing.protect('guarded.ledger', key_columns => '{account}');

------------------------------------------------------------------------------
-- leased: the guarded shop, the lock service PostgreSQL itself: the workers
-- take the lease 'leased:refund-r1' (fencing.lease_acquire) and write with
-- its token.  Protected as "guarded" is, no lease option: a stale token is
-- rejected once a newer one has written.
------------------------------------------------------------------------------
CREATE SCHEMA leased;

CREATE TABLE leased.accounts (
    id              text PRIMARY KEY,
    balance_cents   bigint NOT NULL
);

CREATE TABLE leased.refunds (
    id              text PRIMARY KEY,
    account         text NOT NULL REFERENCES leased.accounts,
    amount_cents    bigint NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    paid_by         text,
    fence           fencing.fence           -- written by the guard
);

CREATE TABLE leased.ledger (
    id              bigserial PRIMARY KEY,
    account         text NOT NULL,
    refund          text NOT NULL,
    amount_cents    bigint NOT NULL,
    booked_by       text NOT NULL,
    token           text NOT NULL,
    booked_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    fence           fencing.fence           -- written by the guard
);

INSERT INTO leased.accounts VALUES ('merchant-1', 10000);
INSERT INTO leased.refunds (id, account, amount_cents) VALUES ('r-1', 'merchant-1', 2500);

SELECT fencing.protect('leased.refunds');
SELECT fencing.protect('leased.ledger', key_columns => '{account}');

------------------------------------------------------------------------------
-- lease_guarded: the same, and the guard checks the lease too
-- (fencing.protect(..., lease => 'lease_guarded:refund-r1')): a write's
-- token must be the lease's current token and the lease live
-- (fencing.lease_check), whether or not a newer token has written.
------------------------------------------------------------------------------
CREATE SCHEMA lease_guarded;

CREATE TABLE lease_guarded.accounts (
    id              text PRIMARY KEY,
    balance_cents   bigint NOT NULL
);

CREATE TABLE lease_guarded.refunds (
    id              text PRIMARY KEY,
    account         text NOT NULL REFERENCES lease_guarded.accounts,
    amount_cents    bigint NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    paid_by         text,
    fence           fencing.fence           -- written by the guard
);

CREATE TABLE lease_guarded.ledger (
    id              bigserial PRIMARY KEY,
    account         text NOT NULL,
    refund          text NOT NULL,
    amount_cents    bigint NOT NULL,
    booked_by       text NOT NULL,
    token           text NOT NULL,
    booked_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    fence           fencing.fence           -- written by the guard
);

INSERT INTO lease_guarded.accounts VALUES ('merchant-1', 10000);
INSERT INTO lease_guarded.refunds (id, account, amount_cents) VALUES ('r-1', 'merchant-1', 2500);

SELECT fencing.protect('lease_guarded.refunds', lease => 'lease_guarded:refund-r1');
SELECT fencing.protect('lease_guarded.ledger', key_columns => '{account}',
                       lease => 'lease_guarded:refund-r1');

------------------------------------------------------------------------------
-- idem: refund r-2 (40.00), paid out through the payment provider under the
-- idempotency key 'refund:r-2' (scenes/idem.sql).  No guard: the key's claim
-- token is the fence, checked by fencing.idem_complete() in the booking's
-- transaction.
------------------------------------------------------------------------------
CREATE SCHEMA idem;

CREATE TABLE idem.accounts (
    id              text PRIMARY KEY,
    balance_cents   bigint NOT NULL
);

CREATE TABLE idem.refunds (
    id              text PRIMARY KEY,
    account         text NOT NULL REFERENCES idem.accounts,
    amount_cents    bigint NOT NULL,
    state           text NOT NULL DEFAULT 'pending',
    paid_by         text,
    psp_ref         text                    -- the PSP's refund id
);

CREATE TABLE idem.ledger (
    id              bigserial PRIMARY KEY,
    account         text NOT NULL,
    refund          text NOT NULL,
    amount_cents    bigint NOT NULL,
    psp_ref         text NOT NULL,
    booked_by       text NOT NULL,
    token           text NOT NULL,          -- the claim token
    booked_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

INSERT INTO idem.accounts VALUES ('merchant-1', 10000);
INSERT INTO idem.refunds (id, account, amount_cents) VALUES ('r-2', 'merchant-1', 4000);
