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
-- (see its section below).

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
