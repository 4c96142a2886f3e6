package fencing

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/samuel/go-zookeeper/zk"
)

// ZooKeeperSource takes a ZooKeeper lock (the recipe: an ephemeral
// sequential node under Path; the lowest holds the lock, each other
// watches the one before it).  Its token is
// fencing.fence_from_zxid(czxid, generation): the lock node's creation
// zxid, which grows with every node the ensemble creates, so each holder's
// is greater than every earlier holder's; the generation comes from the
// generation table (bump it if the ensemble ever loses its data).
//
// The lock lasts as long as the Conn's session: the node is ephemeral, and
// ZooKeeper deletes it the session timeout after the client stopped
// heartbeating (paused, partitioned, dead).  The session timeout is the
// one passed to zk.Connect, as negotiated with the servers (between their
// minSessionTimeout and maxSessionTimeout, by default 2 and 20 ticks).
type ZooKeeperSource struct {
	Conn            *zk.Conn
	DB              Querier
	Path            string // the lock's node, e.g. /locks/payments
	Service         string // row of the generation table (default: Path)
	GenerationTable string

	node string
}

// NewZooKeeperSource: a lock under path.
func NewZooKeeperSource(conn *zk.Conn, db Querier, path string) *ZooKeeperSource {
	return &ZooKeeperSource{Conn: conn, DB: db, Path: path}
}

func zkSeq(name string) (int, error) {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return 0, fmt.Errorf("fencing: not a lock node: %s", name)
	}
	return strconv.Atoi(name[i+1:])
}

func (s *ZooKeeperSource) ensurePath() error {
	p := ""
	for _, part := range strings.Split(strings.Trim(s.Path, "/"), "/") {
		p += "/" + part
		if _, err := s.Conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			return err
		}
	}
	return nil
}

// Acquire waits for the lock (until ctx ends).
func (s *ZooKeeperSource) Acquire(ctx context.Context) (Token, error) {
	if s.node != "" {
		return Token{}, fmt.Errorf("fencing: ZooKeeper lock %s already held", s.Path)
	}
	if err := s.ensurePath(); err != nil {
		return Token{}, err
	}
	node, err := s.Conn.CreateProtectedEphemeralSequential(s.Path+"/lock-", nil, zk.WorldACL(zk.PermAll))
	if err != nil {
		return Token{}, err
	}
	fail := func(err error) (Token, error) {
		s.Conn.Delete(node, -1)
		return Token{}, err
	}
	mySeq, err := zkSeq(node)
	if err != nil {
		return fail(err)
	}
	for {
		children, _, err := s.Conn.Children(s.Path)
		if err != nil {
			return fail(err)
		}
		prev, prevSeq, found := "", -1, false
		for _, c := range children {
			seq, err := zkSeq(c)
			if err != nil {
				continue
			}
			if seq == mySeq {
				found = true
			} else if seq < mySeq && seq > prevSeq {
				prev, prevSeq = c, seq
			}
		}
		if !found {
			return fail(fmt.Errorf("fencing: ZooKeeper lock node %s vanished (session expired)", node))
		}
		if prev == "" {
			break
		}
		exists, _, ch, err := s.Conn.ExistsW(s.Path + "/" + prev)
		if err != nil {
			return fail(err)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	exists, stat, err := s.Conn.Exists(node)
	if err == nil && !exists {
		err = fmt.Errorf("fencing: ZooKeeper lock node %s vanished (session expired)", node)
	}
	if err != nil {
		return fail(err)
	}
	service := s.Service
	if service == "" {
		service = s.Path
	}
	gen, err := ReadGeneration(ctx, s.DB, s.GenerationTable, service)
	if err != nil {
		return fail(err)
	}
	var t string
	if err := s.DB.QueryRow(ctx, "SELECT fencing.fence_from_zxid($1, $2)::text", stat.Czxid, int32(gen)).Scan(&t); err != nil {
		return fail(err)
	}
	tok, err := ParseToken(t)
	if err != nil {
		return fail(err)
	}
	s.node = node
	return tok, nil
}

// Node is the lock node while held.
func (s *ZooKeeperSource) Node() string { return s.node }

// Release deletes the lock node.
func (s *ZooKeeperSource) Release(ctx context.Context) error {
	if s.node == "" {
		return ErrNotHeld
	}
	err := s.Conn.Delete(s.node, -1)
	s.node = ""
	if err == zk.ErrNoNode {
		return ErrNotHeld
	}
	return err
}
