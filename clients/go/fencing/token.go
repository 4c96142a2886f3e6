// Package fencing is the Go client of the fencing PostgreSQL extension,
// which makes the database refuse writes from stale lock holders.
//
// A TokenSource is a lock that hands out fencing tokens: the built-in
// lease (LeaseSource), etcd (EtcdSource), ZooKeeper (ZooKeeperSource),
// Redis (RedisSource), or a token you already have (StaticToken).
// RunFenced runs a fenced transaction: BEGIN, the transaction's token
// bound with fencing.set_token, your statements, COMMIT; a holder that
// lost its lock is refused by the server (SQLSTATE SF001) and gets a
// *FencedOutError that errors.Is matches with ErrStaleToken and friends.
//
// See README.md beside this file.
package fencing

import (
	"fmt"
	"strconv"
	"strings"
)

// Token is a fencing token, epoch:counter (fencing.fence in SQL).
// Tokens order by Epoch, then Counter.
type Token struct {
	Epoch   int64
	Counter int64
}

// String gives the token as the extension writes it: "epoch:counter".
func (t Token) String() string {
	return strconv.FormatInt(t.Epoch, 10) + ":" + strconv.FormatInt(t.Counter, 10)
}

// Less is true when t orders before u.
func (t Token) Less(u Token) bool {
	return t.Epoch < u.Epoch || (t.Epoch == u.Epoch && t.Counter < u.Counter)
}

// IsZero is true for the zero Token (no token).
func (t Token) IsZero() bool { return t == Token{} }

// ParseToken reads "epoch:counter" (a bare "counter" means epoch 0).
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	e, c := "0", s
	if i := strings.IndexByte(s, ':'); i >= 0 {
		e, c = s[:i], s[i+1:]
	}
	epoch, err1 := strconv.ParseInt(e, 10, 64)
	counter, err2 := strconv.ParseInt(c, 10, 64)
	if err1 != nil || err2 != nil || epoch < 0 || counter < 0 {
		return Token{}, fmt.Errorf("fencing: bad token %q (want epoch:counter, two non-negative integers)", s)
	}
	return Token{Epoch: epoch, Counter: counter}, nil
}

// TokenFromZxid is fencing.fence_from_zxid(zxid, generation) computed in
// the client: epoch (generation << 32) | (zxid >> 32), counter
// zxid & 0xffffffff.  Tokens so made order as zxids do, and a raised
// generation beats every zxid of the generations before it.
func TokenFromZxid(zxid int64, generation int32) Token {
	return Token{
		Epoch:   int64(generation)<<32 | int64(uint64(zxid)>>32),
		Counter: int64(uint64(zxid) & 0xffffffff),
	}
}

// Scope is a key or table scope whose fence a source raises when it takes
// its lock (the first meter, WithFences): Table is the protected table's
// name (as regclass reads it), Key the values of its key columns in their
// order, as text; no Key for the table scope.
type Scope struct {
	Table string
	Key   []string
}

// KeyScope is Scope{Table: table, Key: key}.
func KeyScope(table string, key ...string) Scope { return Scope{Table: table, Key: key} }
